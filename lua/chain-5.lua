-- chain: queue the fire that the end of an upstream fire triggers, once ever.
-- KEYS[1] queue    zset fire -> due time, ms: of the downstream job's pool
-- KEYS[2] payloads hash fire -> payload JSON
-- KEYS[3] jobs     hash job -> policy line (the downstream job must be published)
-- KEYS[4] chained  zset fire -> when it was queued, ms: the chain fires queued in the last
--                  7 days, so an upstream end read twice never queues its fire again
-- KEYS[5] history  list: the downstream job's runs, newest first
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire (its id derives from the upstream fire's: cronsvc/fires.py chain_fire)
-- ARGV[3] due_ms
-- ARGV[4] payload JSON
-- ARGV[5] history record JSON added when it is queued: the link, status chained, reason
--         naming the upstream fire and how it ended
-- ARGV[6] history cap
-- Returns 1 if queued, 0 if it was queued before, -1 if its job is not published.
-- @include now.lua
-- @include fires.lua
local fid = ARGV[2]
if redis.call('ZSCORE', KEYS[4], fid) then return 0 end
if redis.call('HEXISTS', KEYS[3], job_of(fid)) == 0 then return -1 end
redis.call('ZADD', KEYS[1], 'NX', ARGV[3], fid)
redis.call('HSET', KEYS[2], fid, ARGV[4])
redis.call('ZADD', KEYS[4], now, fid)
redis.call('LPUSH', KEYS[5], ARGV[5])
redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[6]) - 1)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - 7 * 86400000)
return 1
