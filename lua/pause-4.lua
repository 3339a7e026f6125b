-- pause: stop new fires of a job at once, and say which of its fires are already claimed.
-- KEYS[1] jobs     hash job -> policy line (the job must be published): Keys.job_lines, so
--                  that a sharded fleet pauses a job on every shard its fires may be on
-- KEYS[2] paused   hash job -> JSON {note, since} of a runtime pause
-- KEYS[3] working  zset fire -> lease deadline, ms
-- KEYS[4] claims   hash fire -> JSON of the claim {worker, token, due, claimed_at}
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] job
-- ARGV[3] note ('' for none)
-- Returns one flat array: since_ms, then per fire of the job still in flight (claimed before
--   this call: claim sees the pause in every call after it): fire, lease deadline ms, claim
--   JSON or ''. A job paused already keeps its `since` (the note is replaced).
-- Error 'UNKNOWN_JOB <job>' if the job is not published.
-- @include now.lua
-- @include fires.lua
local job = ARGV[2]
if redis.call('HEXISTS', KEYS[1], job) == 0 then
  return redis.error_reply('UNKNOWN_JOB ' .. job)
end
local since = now
local old = redis.call('HGET', KEYS[2], job)
if old then
  local ok, decoded = pcall(cjson.decode, old)
  if ok and type(decoded) == 'table' and tonumber(decoded.since) then
    since = tonumber(decoded.since)
  end
end
-- Built by hand: cjson would write a large integer in exponent notation.
redis.call('HSET', KEYS[2], job,
  '{"note":' .. cjson.encode(ARGV[3]) .. ',"since":' .. string.format('%d', since) .. '}')
local out = {since}
local head = fire_head(job)
local working = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
for i = 1, #working, 2 do
  local fid = working[i]
  if has_head(fid, head) then
    out[#out + 1] = fid
    out[#out + 1] = tonumber(working[i + 1])
    out[#out + 1] = redis.call('HGET', KEYS[4], fid) or ''
  end
end
return out
