-- enqueue: queue a one-off fire (trigger now, run at) of a published job. A trigger the
-- job's bounds would drop now (overlap forbid, max_concurrent, a named limit, a fire that
-- waits already under overlap queue) is refused instead, saying why: the claim judges as
-- it does (includes/slots.lua), and a trigger that passes may still meet a run started
-- meanwhile, then recorded as skipped like any fire.
-- KEYS[1] queue     zset fire -> due time, ms
-- KEYS[2] payloads  hash fire -> payload JSON
-- KEYS[3] jobs      hash job -> policy line
-- KEYS[4] running   hash job -> fire in flight (overlap forbid/replace/queue)
-- KEYS[5] working   zset fire -> lease deadline, ms, of the job's pool
-- KEYS[6] slots     hash of the fires holding the slots of an owner or a limit, and of the
--                   fire of an owner waiting for one (includes/slots.lua)
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire
-- ARGV[3] due_ms
-- ARGV[4] payload JSON, or '' for none
-- ARGV[5] '1': judge it by the job's bounds now (a trigger), '' to queue it as it is
-- Returns 1 if queued, 0 if that fire was queued already; error 'UNKNOWN_JOB <job>', or
-- 'SKIPPED <why>' for a trigger the bounds drop.
-- @include now.lua
-- @include fires.lua
-- @include policy.lua
-- @include slots.lua
local queue, payloads, jobs, running, working, slots =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local fid = ARGV[2]
local job = job_of(fid)
local line = job and redis.call('HGET', jobs, job)
if not line then
  return redis.error_reply('UNKNOWN_JOB ' .. tostring(job or fid))
end

-- Why the claim would drop fid if it were due now, or nil: admit() of slots.lua for a
-- fire not asked by hand, without its writes.
local function dropped(p, owner)
  local why
  if p.overlap ~= 'allow' and p.most == 0 then
    local ahead = redis.call('HGET', running, owner)
    if ahead and redis.call('ZSCORE', working, ahead) then
      if p.overlap == 'forbid' then return 'overlap forbid: ' .. ahead .. ' is running' end
      if p.overlap == 'replace' then return nil end  -- it takes over from the running one
      why = 'overlap queue'
    end
  end
  if not why and p.bounded and p.overlap ~= 'replace' then
    why = slots_of(slots, running, working, now).full(p, owner)
  end
  if not why or p.overlap ~= 'queue' then return why end
  local waits = redis.call('HGET', slots, 'w:' .. owner)
  if waits and waits ~= fid and redis.call('ZSCORE', queue, waits) then
    return 'overlap queue: ' .. waits .. ' waits already'
  end
  return nil  -- it waits for the slot
end

local p = parse_policy(line)
if ARGV[5] == '1' and p then
  local why = dropped(p, owner_of(fid, job))
  if why then return redis.error_reply('SKIPPED ' .. why) end
end
local added = redis.call('ZADD', queue, 'NX', ARGV[3], fid)
if added == 1 and ARGV[4] ~= '' then redis.call('HSET', payloads, fid, ARGV[4]) end
return added
