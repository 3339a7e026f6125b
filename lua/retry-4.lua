-- retry: queue a dead fire again now, with a fresh set of attempts.
-- KEYS[1] dead      zset fire -> time it died, ms
-- KEYS[2] queue     zset fire -> due (or retry) time, ms
-- KEYS[3] attempts  hash fire -> attempts used
-- KEYS[4] events    list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire
-- Returns 1 if the fire was dead and is queued now, 0 if it is not dead.
-- Attempts restart at 0, not deleted: claim judges the starting deadline and catch_up only on
-- a fire's first start (no attempts entry), and a dead fire is late by nature. Its first
-- claim gets token 1 and the job's full retries. The payload of a one-off stays.
-- @include now.lua
-- @include events.lua
local fid = ARGV[2]
if redis.call('ZREM', KEYS[1], fid) == 0 then return 0 end
redis.call('HSET', KEYS[3], fid, 0)
redis.call('ZADD', KEYS[2], now, fid)
push_event(KEYS[4], cjson.encode({event = 'requeued', fire = fid, at = now,
  reason = 'dead retry'}))
return 1
