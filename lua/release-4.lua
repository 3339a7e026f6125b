-- release: give claims back to the queue at their due time without using an attempt.
-- KEYS[1] working   zset fire -> lease deadline, ms
-- KEYS[2] queue     zset fire -> due time, ms
-- KEYS[3] attempts  hash fire -> fencing token = attempts used
-- KEYS[4] claims    hash fire -> JSON claim (its due is where the fire goes back)
-- ARGV[1..] pairs: fire, token; pairs whose token is not current are left alone
-- Returns the number of fires released.
-- @include fires.lua
local released = 0
for i = 1, #ARGV - 1, 2 do
  local fid, token = ARGV[i], tonumber(ARGV[i + 1])
  if tonumber(redis.call('HGET', KEYS[3], fid)) == token
      and redis.call('ZREM', KEYS[1], fid) == 1 then
    local claim = redis.call('HGET', KEYS[4], fid)
    local due = claim and cjson.decode(claim).due or due_of(fid)
    redis.call('ZADD', KEYS[2], due, fid)
    if redis.call('HINCRBY', KEYS[3], fid, -1) <= 0 then redis.call('HDEL', KEYS[3], fid) end
    redis.call('HDEL', KEYS[4], fid)
    released = released + 1
  end
end
return released
