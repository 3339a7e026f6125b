-- ack: finish a fire held with this token and record its run in the job's history.
-- KEYS[1] working   zset fire -> lease deadline, ms
-- KEYS[2] attempts  hash fire -> fencing token of the current claim
-- KEYS[3] claims    hash fire -> claim
-- KEYS[4] running   hash job -> fire in flight
-- KEYS[5] cancels   hash fire -> reason the holder must stop
-- KEYS[6] payloads  hash fire -> payload JSON
-- KEYS[7] history   list: this job's runs, newest first
-- KEYS[8] events    list of JSON decisions (unused: the history line is the record)
-- ARGV[1] now_ms, or '' (unused)
-- ARGV[2] fire, ARGV[3] token, ARGV[4] job, ARGV[5] record JSON, ARGV[6] history cap
-- Returns 1; error 'LEASE_LOST <fire> token <token> current <current>' if the token is not
-- the current one or the fire is not in working (a newer claim must not be finished by us).
local fid, token, job = ARGV[2], ARGV[3], ARGV[4]
local current = redis.call('HGET', KEYS[2], fid)
if tonumber(current) ~= tonumber(token) or redis.call('ZREM', KEYS[1], fid) == 0 then
  return redis.error_reply('LEASE_LOST ' .. fid .. ' token ' .. token ..
    ' current ' .. tostring(current or 'none'))
end
redis.call('HDEL', KEYS[2], fid)
redis.call('HDEL', KEYS[3], fid)
redis.call('HDEL', KEYS[5], fid)
redis.call('HDEL', KEYS[6], fid)
if redis.call('HGET', KEYS[4], job) == fid then redis.call('HDEL', KEYS[4], job) end
if redis.call('LPUSH', KEYS[7], ARGV[5]) > tonumber(ARGV[6]) then
  redis.call('LTRIM', KEYS[7], 0, tonumber(ARGV[6]) - 1)
end
return 1
