-- purge: forget dead fires (all, or one job's) with their attempts and payloads.
-- KEYS[1] dead      zset fire -> time it died, ms
-- KEYS[2] attempts  hash fire -> attempts used
-- KEYS[3] payloads  hash fire -> payload JSON of one-off fires
-- KEYS[4] events    list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] job whose dead fires go, or '' for every job of this shard
-- Returns the number of fires purged.
-- @include now.lua
local head = ARGV[2] ~= '' and (ARGV[2] .. '@') or nil
local n = 0
for _, fid in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if not head or string.sub(fid, 1, #head) == head then
    redis.call('ZREM', KEYS[1], fid)
    redis.call('HDEL', KEYS[2], fid)
    redis.call('HDEL', KEYS[3], fid)
    n = n + 1
  end
end
if n > 0 then
  redis.call('LPUSH', KEYS[4], cjson.encode({event = 'purged', job = ARGV[2], at = now,
    count = n}))
  redis.call('LTRIM', KEYS[4], 0, 9999)
end
return n
