-- plan: queue the fires of jobs later than their watermark, then raise the watermark.
-- Idempotent: a fire at or before a job's watermark is never queued again, even after it ran.
-- KEYS[1] queue       zset fire -> due time, ms
-- KEYS[2] watermarks  hash job -> ms: every fire due at or before it has been planned
-- KEYS[3] jobs        hash job -> policy line, digest first
-- ARGV[1]   n_jobs (planning needs no clock)
-- ARGV[2..] per job: job, digest, upto_ms, n, due_1 .. due_n (ascending ms)
-- Returns {added_count, stale_jobs}: jobs whose digest is not the published one are skipped.
-- @include bulk.lua
-- @include fires.lua
-- @include policy.lua
local added, stale = 0, {}
local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local job, digest, upto_s, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local upto = tonumber(upto_s)
  local first = i + 4
  i = first + n
  local line = redis.call('HGET', KEYS[3], job)
  if not line or policy_digest(line) ~= digest then
    stale[#stale + 1] = job
  else
    local wm = tonumber(redis.call('HGET', KEYS[2], job)) or -1
    local args = {}
    for k = first, i - 1 do
      local due = tonumber(ARGV[k])
      if due > wm and due <= upto then
        args[#args + 1] = ARGV[k]
        args[#args + 1] = fire_id(job, ARGV[k])
      end
    end
    added = added + bulk('ZADD', KEYS[1], args, 2, 'NX')
    if upto > wm then redis.call('HSET', KEYS[2], job, upto_s) end
  end
end
return {added, stale}
