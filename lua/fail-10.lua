-- fail: record a failed attempt; requeue it for a retry while attempts remain, else dead-letter.
-- KEYS[1]  working   zset fire -> lease deadline, ms
-- KEYS[2]  queue     zset fire -> due (or retry) time, ms
-- KEYS[3]  attempts  hash fire -> fencing token = attempts used
-- KEYS[4]  claims    hash fire -> claim
-- KEYS[5]  running   hash job -> fire in flight
-- KEYS[6]  cancels   hash fire -> reason the holder must stop
-- KEYS[7]  payloads  hash fire -> payload JSON (kept: a retry or a dead retry needs it)
-- KEYS[8]  dead      zset fire -> time it died, ms
-- KEYS[9]  history   list: this job's runs, newest first
-- KEYS[10] events    list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire, ARGV[3] token, ARGV[4] job, ARGV[5] record JSON, ARGV[6] history cap,
-- ARGV[7] max_attempts, ARGV[8] retry_at_ms
-- Returns {'retry', retry_at_ms} or {'dead', now_ms}; error LEASE_LOST as ack.
-- @include now.lua
local fid, token, job = ARGV[2], ARGV[3], ARGV[4]
local current = redis.call('HGET', KEYS[3], fid)
if tonumber(current) ~= tonumber(token) or not redis.call('ZSCORE', KEYS[1], fid) then
  return redis.error_reply('LEASE_LOST ' .. fid .. ' token ' .. token ..
    ' current ' .. tostring(current or 'none'))
end
local cap = tonumber(ARGV[6])
redis.call('ZREM', KEYS[1], fid)
redis.call('HDEL', KEYS[4], fid)
redis.call('HDEL', KEYS[6], fid)
if redis.call('HGET', KEYS[5], job) == fid then redis.call('HDEL', KEYS[5], job) end
redis.call('LPUSH', KEYS[9], ARGV[5])
local verdict, at
if tonumber(token) < tonumber(ARGV[7]) then
  verdict, at = 'retry', tonumber(ARGV[8])
  redis.call('ZADD', KEYS[2], at, fid)
  redis.call('LPUSH', KEYS[10],
    cjson.encode({event = 'retry', fire = fid, attempt = tonumber(token), at = now, retry_at = at}))
else
  -- Attempts and payload stay, so the dead fire can be retried by hand.
  verdict, at = 'dead', now
  redis.call('ZADD', KEYS[8], now, fid)
  -- The reason names the last attempt's error: what `cronsvc dead` shows.
  local ok, last = pcall(cjson.decode, ARGV[5])
  local why = ok and type(last) == 'table' and (last.reason or last.status) or nil
  local line = cjson.encode({fire = fid, job = job, status = 'dead', attempt = tonumber(token),
    scheduled = tonumber(string.match(fid, '@(%d+)')),
    reason = 'no attempts left' .. (type(why) == 'string' and (': ' .. why) or '')})
  redis.call('LPUSH', KEYS[9], line)
  redis.call('LPUSH', KEYS[10],
    cjson.encode({event = 'dead', fire = fid, attempt = tonumber(token), at = now}))
end
redis.call('LTRIM', KEYS[9], 0, cap - 1)
redis.call('LTRIM', KEYS[10], 0, 9999)
return {verdict, at}
