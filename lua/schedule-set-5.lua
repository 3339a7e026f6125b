-- schedule-set: create or change one runtime schedule, unqueue the fires of its old
-- definition that have not started, and queue its first fires: all or nothing.
-- A compare-and-set: the caller read the schedule's rev and mark, and computed from them
-- which fires to unqueue; if either moved since, nothing changes and it reads again.
-- KEYS[1] schedules        hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks   zset schedule id -> planned up to, ms
-- KEYS[3] schedule_counts  hash job -> runtime schedules of this shard that run it
-- KEYS[4] queue            zset fire -> due time, ms
-- KEYS[5] events           list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] schedule id
-- ARGV[3] the rev read ('0': the schedule did not exist)
-- ARGV[4] the mark read ('' for none)
-- ARGV[5] the new definition: the stored line after actor (job|paused|...|payload)
-- ARGV[6] actor
-- ARGV[7] the new mark: every fire of the new definition at or before it is in ARGV[9..]
-- ARGV[8] n: how many fires of the old definition to unqueue
-- ARGV[9..] the n fire ids to unqueue, then the due times (ms) of the new fires to queue
-- Like a published job's new digest, the new definition queues fires after now only: a new
-- fire due by now is left out, since the clock the caller planned from was read before this
-- call, and a fire of that id may have started (or ended) under the old definition already.
-- Returns {'created' | 'changed' | 'unchanged', rev}, or {'retry', rev} when the rev or the
-- mark moved since they were read.
-- @include now.lua
-- @include events.lua
-- @include schedules.lua
-- @include bulk.lua
-- @include fires.lua
local sid, content = ARGV[2], ARGV[5]
local line = redis.call('HGET', KEYS[1], sid)
local rev = line and schedule_rev(line) or '0'
local mark = redis.call('ZSCORE', KEYS[2], sid) or ''
if rev ~= ARGV[3] or (mark ~= ARGV[4] and tonumber(mark) ~= tonumber(ARGV[4])) then
  return {'retry', tonumber(rev)}
end
if line and schedule_content(line) == content then return {'unchanged', tonumber(rev)} end
local now_s = string.format('%d', now)
local created = line and string.match(line, '^%d+|(%d+)|') or now_s
local new_rev = tonumber(rev) + 1
local job = string.match(content, '^([^|]*)|')
local old_job = line and schedule_policy(line) or nil
redis.call('HSET', KEYS[1], sid,
  string.format('%d', new_rev) .. '|' .. created .. '|' .. now_s .. '|' .. ARGV[6] .. '|' .. content)
if old_job ~= job then
  redis.call('HINCRBY', KEYS[3], job, 1)
  if old_job and redis.call('HINCRBY', KEYS[3], old_job, -1) <= 0 then
    redis.call('HDEL', KEYS[3], old_job)
  end
end
local n = tonumber(ARGV[8])
bulk('ZREM', KEYS[4], ARGV, 1, nil, 9, 8 + n)
local args = {}
for i = 9 + n, #ARGV do
  if tonumber(ARGV[i]) > now then
    args[#args + 1] = ARGV[i]
    args[#args + 1] = fire_id(job, ARGV[i], sid)
  end
end
bulk('ZADD', KEYS[4], args, 2, 'NX')
redis.call('ZADD', KEYS[2], ARGV[7], sid)
push_event(KEYS[5], cjson.encode({event = line and 'schedule changed' or 'schedule created',
  schedule = sid, rev = new_rev, by = ARGV[6], unqueued = n, at = now}))
return {line and 'changed' or 'created', new_rev}
