-- schedule-plan: queue the next fires of runtime schedules and raise their marks.
-- Idempotent like plan: a compare-and-set on each schedule's rev and mark, so two planners
-- at once, or a change meanwhile, never queue a fire twice or one of an old definition.
-- KEYS[1] schedules        hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks   zset schedule id -> planned up to, ms
-- KEYS[3] queue            zset fire -> due time, ms
-- ARGV[1]   n_schedules (planning needs no clock)
-- ARGV[2..] per schedule: id, the rev read, the mark read, the new mark, n, due_1 .. due_n
-- Returns {added_count, ids skipped because their rev or mark moved (or they are gone)}.
-- @include schedules.lua
-- @include bulk.lua
-- @include fires.lua
local added, skipped = 0, {}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local sid, rev, mark, new_mark, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    tonumber(ARGV[i + 4])
  local first = i + 5
  i = first + n
  local line = redis.call('HGET', KEYS[1], sid)
  local current = redis.call('ZSCORE', KEYS[2], sid)
  if not line or schedule_rev(line) ~= rev or not current
      or tonumber(current) ~= tonumber(mark) or not schedule_policy(line) then
    skipped[#skipped + 1] = sid
  else
    local job = schedule_policy(line)
    local args = {}
    for k = first, i - 1 do
      args[#args + 1] = ARGV[k]
      args[#args + 1] = fire_id(job, ARGV[k], sid)
    end
    added = added + bulk('ZADD', KEYS[3], args, 2, 'NX')
    redis.call('ZADD', KEYS[2], new_mark, sid)
  end
end
return {added, skipped}
