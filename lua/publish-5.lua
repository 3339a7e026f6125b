-- publish: write new, changed and removed job definitions; unqueue fires of old definitions.
-- KEYS[1] queue       zset fire -> due time, ms
-- KEYS[2] jobs        hash job -> policy line digest|catch_up|deadline_ms|overlap|max_attempts|paused
-- KEYS[3] specs       hash job -> JSON {cron, timezone, jitter}
-- KEYS[4] watermarks  hash job -> ms planned up to
-- KEYS[5] events      list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] n_set, then per job: job, expected old digest ('-' = absent), policy line, spec JSON
-- then    n_removed, then per job: job, expected old digest
-- then    n_fires, then the fire ids to unqueue (never touched in working)
-- A job whose current digest is not the expected one is a conflict: left as is, and its
-- fires in this call stay queued (another planner published it meanwhile).
-- A new digest moves the watermark to now: the new definition plans fires after now only.
-- Returns {n_changed (jobs written), n_removed, n_fires_removed, conflicts: {job...}}
redis.replicate_commands()  -- TIME before writes needs effects replication on Redis < 7
local now = tonumber(ARGV[1]) or (function()
  local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end)()

local function digest_of(job)
  local line = redis.call('HGET', KEYS[2], job)
  return line and string.match(line, '^[^|]*') or '-'
end

local changed, removed, unqueued, conflicts, conflicted = 0, 0, 0, {}, {}
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local job, expected, line, spec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local current = digest_of(job)
  if current ~= expected then
    conflicts[#conflicts + 1] = job
    conflicted[job] = true
  else
    redis.call('HSET', KEYS[2], job, line)
    redis.call('HSET', KEYS[3], job, spec)
    if string.match(line, '^[^|]*') ~= current then
      redis.call('HSET', KEYS[4], job, now)
    end
    changed = changed + 1
  end
end
local n_removed = tonumber(ARGV[i])
i = i + 1
for _ = 1, n_removed do
  local job, expected = ARGV[i], ARGV[i + 1]
  i = i + 2
  if digest_of(job) ~= expected then
    conflicts[#conflicts + 1] = job
    conflicted[job] = true
  else
    removed = removed + redis.call('HDEL', KEYS[2], job)
    redis.call('HDEL', KEYS[3], job)
    redis.call('HDEL', KEYS[4], job)
  end
end
local n_fires = tonumber(ARGV[i])
for k = i + 1, i + n_fires do
  local fid = ARGV[k]
  local job = string.match(fid, '^(.-)@')
  if not conflicted[job] and redis.call('ZREM', KEYS[1], fid) == 1 then
    unqueued = unqueued + 1
    local reason = redis.call('HEXISTS', KEYS[2], job) == 1 and 'changed' or 'removed'
    redis.call('LPUSH', KEYS[5],
      cjson.encode({event = 'unqueued', fire = fid, reason = reason, at = now}))
  end
end
if unqueued > 0 then redis.call('LTRIM', KEYS[5], 0, 9999) end
return {changed, removed, unqueued, conflicts}
