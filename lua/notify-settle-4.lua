-- notify-settle: what became of one attempt to deliver a message.
-- KEYS[1] deliveries  hash delivery id -> JSON of a message not yet delivered
-- KEYS[2] due         zset delivery id -> when to try it, of the message's channel
-- KEYS[3] sent        zset delivery id -> when it was delivered, ms; kept a day
-- KEYS[4] undelivered hash delivery id -> JSON of a message given up on
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] delivery id
-- ARGV[3] sent | retry | dead
-- ARGV[4] retry: when to try again, ms (else unused, '')
-- ARGV[5] retry, dead: the message's JSON with its attempts and last error
-- Returns 1, or 0 when the message is not pending (settled already).
-- @include now.lua
local id, verdict = ARGV[2], ARGV[3]
if redis.call('HEXISTS', KEYS[1], id) == 0 then return 0 end
if verdict == 'retry' then
  redis.call('HSET', KEYS[1], id, ARGV[5])
  redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), id)
  return 1
end
redis.call('HDEL', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
if verdict == 'sent' then
  redis.call('ZADD', KEYS[3], now, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 86400000)
else
  redis.call('HSET', KEYS[4], id, ARGV[5])
end
return 1
