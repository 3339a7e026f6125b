-- notify-route: turn outbox events into messages to send, per channel, and take them out of
-- the outbox, in one step: an event is either still in the outbox or its messages exist.
-- KEYS[1] lease       string: the notifier that sends; nothing is done unless ARGV[2] holds it
-- KEYS[2] deliveries  hash delivery id -> JSON of a message not yet delivered
-- KEYS[3] sent        zset delivery id -> when it was delivered, ms (never sent twice)
-- KEYS[4] episodes    hash job and event -> JSON of its episode (cronsvc/notify/fold.py)
-- KEYS[5] outbox      list of events, newest first: the oldest ARGV[3] entries are removed
-- KEYS[6] malformed   list of entries set aside: outbox entries that are no event
-- KEYS[6 + i]         zset delivery id -> when to try it, of the i-th message's channel
-- ARGV[1]   now_ms, or '' for the server clock
-- ARGV[2]   notifier id
-- ARGV[3]   outbox entries routed (removed from the oldest end of KEYS[5])
-- ARGV[4]   a: outbox entries set aside
-- ARGV[5..] a lines of KEYS[6] (cronsvc/malformed.py); then n: episodes changed, then n
--           pairs: field, JSON ('' deletes it); then per message: delivery id, JSON (one
--           already queued or sent is skipped)
-- Returns the number of messages queued, or error NOT_LEADER when ARGV[2] lost the lease.
-- @include now.lua
-- @include malformed.lua
if redis.call('GET', KEYS[1]) ~= ARGV[2] then
  return redis.error_reply('NOT_LEADER ' .. ARGV[2])
end
local routed = tonumber(ARGV[3])
if routed > 0 then redis.call('LTRIM', KEYS[5], 0, -routed - 1) end
local a = tonumber(ARGV[4])
for i = 5, 4 + a do redis.call('LPUSH', KEYS[6], ARGV[i]) end
if a > 0 then redis.call('LTRIM', KEYS[6], 0, MALFORMED_KEPT - 1) end
local at = 5 + a
local n = tonumber(ARGV[at])
for i = at + 1, at + 2 * n, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[4], ARGV[i])
  else
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  end
end
local queued, k = 0, 0
for i = at + 1 + 2 * n, #ARGV, 2 do
  k = k + 1
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[3], id) and redis.call('HSETNX', KEYS[2], id, ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[6 + k], now + k - 1, id)  -- a ms apart: sent in this order
    queued = queued + 1
  end
end
return queued
