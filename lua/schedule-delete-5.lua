-- schedule-delete: remove one runtime schedule and unqueue its fires that have not started
-- (fires in flight finish); a compare-and-set like schedule-set.
-- KEYS[1] schedules        hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks   zset schedule id -> planned up to, ms
-- KEYS[3] schedule_counts  hash job -> runtime schedules of this shard that run it
-- KEYS[4] queue            zset fire -> due time, ms
-- KEYS[5] events           list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] schedule id
-- ARGV[3] the rev read
-- ARGV[4] the mark read ('' for none)
-- ARGV[5..] fire ids of the schedule to unqueue
-- Returns 'deleted', 'absent', or 'retry' when the rev or the mark moved since read.
-- @include now.lua
-- @include events.lua
-- @include schedules.lua
-- @include bulk.lua
local sid = ARGV[2]
local line = redis.call('HGET', KEYS[1], sid)
if not line then return 'absent' end
local mark = redis.call('ZSCORE', KEYS[2], sid) or ''
if schedule_rev(line) ~= ARGV[3] or (mark ~= ARGV[4] and tonumber(mark) ~= tonumber(ARGV[4])) then
  return 'retry'
end
local job = schedule_policy(line)
redis.call('HDEL', KEYS[1], sid)
redis.call('ZREM', KEYS[2], sid)
-- A line that is not a stored schedule (written by hand) was never counted.
if job and redis.call('HINCRBY', KEYS[3], job, -1) <= 0 then redis.call('HDEL', KEYS[3], job) end
bulk('ZREM', KEYS[4], ARGV, 1, nil, 5)
push_event(KEYS[5], cjson.encode({event = 'schedule deleted', schedule = sid,
  unqueued = #ARGV - 4, at = now}))
return 'deleted'
