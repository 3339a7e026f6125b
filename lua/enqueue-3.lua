-- enqueue: queue a one-off fire (trigger now, run at) of a published job.
-- KEYS[1] queue     zset fire -> due time, ms
-- KEYS[2] payloads  hash fire -> payload JSON
-- KEYS[3] jobs      hash job -> policy line
-- ARGV[1] now_ms, or '' (unused)
-- ARGV[2] fire, ARGV[3] due_ms, ARGV[4] payload JSON or '' for none
-- Returns 1 if queued, 0 if that fire was queued already; error 'UNKNOWN_JOB <job>'.
local fid = ARGV[2]
local job = string.match(fid, '^(.-)@%d')
if not job or redis.call('HEXISTS', KEYS[3], job) == 0 then
  return redis.error_reply('UNKNOWN_JOB ' .. tostring(job or fid))
end
local added = redis.call('ZADD', KEYS[1], 'NX', ARGV[3], fid)
if added == 1 and ARGV[4] ~= '' then redis.call('HSET', KEYS[2], fid, ARGV[4]) end
return added
