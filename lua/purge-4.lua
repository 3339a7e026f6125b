-- purge: forget dead fires (all, one job's, or the ones named) with their attempts and
-- payloads.
-- KEYS[1] dead      zset fire -> time it died, ms
-- KEYS[2] attempts  hash fire -> attempts used
-- KEYS[3] payloads  hash fire -> payload JSON of one-off fires
-- KEYS[4] events    list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] job whose dead fires go, or '' for every job of this shard
-- ARGV[3..] if given, only these dead fires go (of that job, if one is named)
-- Returns the number of fires purged.
-- @include now.lua
-- @include events.lua
-- @include fires.lua
local head = ARGV[2] ~= '' and fire_head(ARGV[2]) or nil
local n = 0
local fires = {}
if #ARGV > 2 then
  for i = 3, #ARGV do
    if redis.call('ZSCORE', KEYS[1], ARGV[i]) then fires[#fires + 1] = ARGV[i] end
  end
else
  fires = redis.call('ZRANGE', KEYS[1], 0, -1)
end
for _, fid in ipairs(fires) do
  if not head or has_head(fid, head) then
    redis.call('ZREM', KEYS[1], fid)
    redis.call('HDEL', KEYS[2], fid)
    redis.call('HDEL', KEYS[3], fid)
    n = n + 1
  end
end
if n > 0 then
  push_event(KEYS[4], cjson.encode({event = 'purged', job = ARGV[2], at = now, count = n}))
end
return n
