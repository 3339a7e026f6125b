-- publish: write new, changed and removed job definitions of one file generation; unqueue
-- the fires of old definitions, each job's unqueued fires summed up in one history line.
-- KEYS[1] jobs        hash job -> policy line (cronsvc/policy.py), schedule digest first
-- KEYS[2] specs       hash job -> JSON {cron, timezone, jitter}
-- KEYS[3] watermarks  hash job -> ms planned up to
-- KEYS[4] events      list of JSON decisions, newest first, capped at 10000
-- KEYS[5] published   string: the generation whose definitions this shard holds
-- KEYS[6] job_lines   hash job -> policy line of every job of the file, for the claims of
--                     runtime schedule fires whose job lives on another shard (on one
--                     Redis it is KEYS[1] itself, and the mirror sections below are empty)
-- KEYS[7] attempts    hash fire -> attempt of its current claim (the fires claimed, not
--                     yet done)
-- KEYS[7 + i]         per group g of fires unqueued: i = 2g - 1 the queue they wait in (of
--                     the pool of the old definition), i = 2g the history of their job
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] generation of the file being published
-- ARGV[3] history cap
-- ARGV[4] n_set
-- ARGV[5..] per job set: job, expected old digest ('-' = absent), policy line, spec JSON;
--         then n_removed, then per job removed: job, expected old digest;
--         then n_groups, then per job whose fires go (group g, its keys above): job, why
--         ('removed' or 'replaced'), n, then the n fire ids to unqueue (never in working);
--         then n_mirror, then per job of the whole file whose line changed: job, policy line;
--         then n_unmirror, then the jobs no longer in the file
-- A newer generation already published here wins: error 'SUPERSEDED <generation>', nothing
-- written. A job whose current digest is not the expected one is a conflict: left as is, and
-- its fires stay queued (another planner of the same generation published it meanwhile).
-- A new digest moves the watermark to now: the new definition plans fires after now only,
-- and after the last fire of the job claimed before its due time (a worker's claim ahead:
-- out of the queue, so not unqueued here, and still to run; planned again, it would be
-- queued a second time and run again once the first run was done).
-- A history line {job, status = why, reason, fires, first, last, at, generation} records the
-- unqueued fires of each job (none leaves the queue without one).
-- The mirror is written as given: it copies what the shards of the jobs hold, with no
-- compare-and-set of its own (the generation check above keeps an older file out).
-- Returns {n_changed (jobs written), n_removed, n_fires_unqueued, conflicts: {job...}}
-- @include now.lua
-- @include events.lua
-- @include fires.lua
-- @include policy.lua
local gen = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local current_gen = tonumber(redis.call('GET', KEYS[5]) or '0')
if current_gen > gen then
  return redis.error_reply('SUPERSEDED ' .. current_gen)
end
redis.call('SET', KEYS[5], gen)

local function digest_of(job)
  local line = redis.call('HGET', KEYS[1], job)
  return line and policy_digest(line) or '-'
end

-- job -> the due time of its last fire claimed and due after now (ms), read once.
local claimed_ahead
local function floor_of(job)
  if not claimed_ahead then
    claimed_ahead = {}
    for _, fid in ipairs(redis.call('HKEYS', KEYS[7])) do
      local owner, due_s = cron_parts(fid)
      local due = owner and tonumber(due_s)
      if due and due > now and due > (claimed_ahead[owner] or 0) then
        claimed_ahead[owner] = due
      end
    end
  end
  return math.max(now, claimed_ahead[job] or 0)
end

local changed, removed, unqueued, conflicts, conflicted = 0, 0, 0, {}, {}
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  local job, expected, line, spec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local current = digest_of(job)
  if current ~= expected then
    conflicts[#conflicts + 1] = job
    conflicted[job] = true
  else
    redis.call('HSET', KEYS[1], job, line)
    redis.call('HSET', KEYS[2], job, spec)
    if policy_digest(line) ~= current then
      redis.call('HSET', KEYS[3], job, floor_of(job))
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
    removed = removed + redis.call('HDEL', KEYS[1], job)
    redis.call('HDEL', KEYS[2], job)
    redis.call('HDEL', KEYS[3], job)
  end
end
local REASONS = {removed = 'removed: job deleted from the file',
                 replaced = 'replaced: definition changed'}
local n_groups = tonumber(ARGV[i])
i = i + 1
for g = 1, n_groups do
  local job, why, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local count, first, last = 0, nil, nil
  if not conflicted[job] then
    for k = i + 3, i + 2 + n do
      local fid = ARGV[k]
      if redis.call('ZREM', KEYS[6 + 2 * g], fid) == 1 then
        local due = due_of(fid)
        count = count + 1
        if not first or due < first then first = due end
        if not last or due > last then last = due end
      end
    end
  end
  i = i + 3 + n
  if count > 0 then
    unqueued = unqueued + count
    -- Built by hand: cjson would write large integers in exponent notation.
    local line = '{"job":' .. cjson.encode(job) .. ',"status":' .. cjson.encode(why)
      .. ',"reason":' .. cjson.encode(REASONS[why] or why) .. ',"fires":' .. count
      .. ',"first":' .. string.format('%d', first) .. ',"last":' .. string.format('%d', last)
      .. ',"at":' .. string.format('%d', now) .. ',"generation":' .. gen .. '}'
    redis.call('LPUSH', KEYS[7 + 2 * g], line)
    redis.call('LTRIM', KEYS[7 + 2 * g], 0, cap - 1)
    add_event(KEYS[4], line)
  end
end
if unqueued > 0 then trim_events(KEYS[4]) end
local n_mirror = tonumber(ARGV[i] or '0')
i = i + 1
for _ = 1, n_mirror do
  redis.call('HSET', KEYS[6], ARGV[i], ARGV[i + 1])
  i = i + 2
end
local n_unmirror = tonumber(ARGV[i] or '0')
i = i + 1
for _ = 1, n_unmirror do
  redis.call('HDEL', KEYS[6], ARGV[i])
  i = i + 1
end
return {changed, removed, unqueued, conflicts}
