-- schedule-due: the runtime schedules of a shard whose mark is below a time, with their
-- stored lines, for the planner to plan. A mark that is no schedule's (its member is not a
-- schedule id, or no schedule has it) and a line that is not a stored schedule are set
-- aside here, once: the planner would meet them at every tick.
-- KEYS[1] schedules       hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks  zset schedule id -> planned up to, ms
-- KEYS[3] malformed       list of entries set aside (cronsvc/malformed.py)
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] upto: schedules whose mark is below it are due
-- ARGV[3] offset: due schedules to pass over (those the planner leaves as they are)
-- ARGV[4] page: due schedules returned at most
-- Returns a flat array: per due schedule its id, its mark (ms, at least 0) and its line;
-- then the number of entries set aside.
-- @include now.lua
-- @include schedules.lua
-- @include malformed.lua
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2], 'WITHSCORES',
  'LIMIT', tonumber(ARGV[3]), tonumber(ARGV[4]))
local out, aside = {}, 0
for i = 1, #due, 2 do
  local sid = due[i]
  local line = is_schedule_id(sid) and redis.call('HGET', KEYS[1], sid)
  if not line or not schedule_policy(line) then
    redis.call('ZREM', KEYS[2], sid)
    if line then  -- the schedule goes too, its line kept
      redis.call('HDEL', KEYS[1], sid)
      set_aside(KEYS[3], KEYS[1], sid, 'not a stored schedule', now, line)
    else
      set_aside(KEYS[3], KEYS[2], sid, is_schedule_id(sid) and 'a mark of no schedule'
        or 'not a schedule id', now)
    end
    aside = aside + 1
  else
    out[#out + 1] = sid
    out[#out + 1] = string.format('%d', math.max(tonumber(due[i + 1]), 0))
    out[#out + 1] = line
  end
end
out[#out + 1] = aside
return out
