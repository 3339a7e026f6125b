-- heartbeat: extend the leases of fires still held with the given tokens.
-- KEYS[1] working   zset fire -> lease deadline, ms
-- KEYS[2] attempts  hash fire -> fencing token of the current claim
-- KEYS[3] cancels   hash fire -> reason the holder must stop
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] lease_ms
-- ARGV[3..] pairs: fire, token
-- Returns one result per pair: 1 extended, 2 extended but cancelled (stop the run),
-- 0 lease lost (another claim holds the fire, or it is finished).
-- @include now.lua
local until_ms = now + tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV - 1, 2 do
  local fid, token = ARGV[i], tonumber(ARGV[i + 1])
  local r = 0
  if tonumber(redis.call('HGET', KEYS[2], fid)) == token and redis.call('ZSCORE', KEYS[1], fid) then
    redis.call('ZADD', KEYS[1], 'XX', until_ms, fid)
    r = redis.call('HEXISTS', KEYS[3], fid) == 1 and 2 or 1
  end
  out[#out + 1] = r
end
return out
