-- enqueue: queue a one-off fire (trigger now, run at) of a published job.
-- KEYS[1] queue     zset fire -> due time, ms
-- KEYS[2] payloads  hash fire -> payload JSON
-- KEYS[3] jobs      hash job -> policy line
-- ARGV[1] fire
-- ARGV[2] due_ms
-- ARGV[3] payload JSON, or '' for none
-- Returns 1 if queued, 0 if that fire was queued already; error 'UNKNOWN_JOB <job>'.
-- @include fires.lua
local fid = ARGV[1]
local job = job_of(fid)
if not job or redis.call('HEXISTS', KEYS[3], job) == 0 then
  return redis.error_reply('UNKNOWN_JOB ' .. tostring(job or fid))
end
local added = redis.call('ZADD', KEYS[1], 'NX', ARGV[2], fid)
if added == 1 and ARGV[3] ~= '' then redis.call('HSET', KEYS[2], fid, ARGV[3]) end
return added
