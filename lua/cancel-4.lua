-- cancel: unqueue a fire that has not started.
-- KEYS[1] queue     zset fire -> due time, ms
-- KEYS[2] payloads  hash fire -> payload JSON
-- KEYS[3] attempts  hash fire -> attempts used (a retry waiting in the queue has some)
-- KEYS[4] events    list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire
-- Returns 1 if it was unqueued, 0 if it was not queued (it runs, ran, or never existed).
-- @include now.lua
-- @include events.lua
local fid = ARGV[2]
if redis.call('ZREM', KEYS[1], fid) == 0 then return 0 end
redis.call('HDEL', KEYS[2], fid)
redis.call('HDEL', KEYS[3], fid)
push_event(KEYS[4], cjson.encode({event = 'cancelled', fire = fid, at = now}))
return 1
