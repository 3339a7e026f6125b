-- claim: stale fires first, then due fires, up to a batch; drop what policy says not to run.
-- Only fires whose job definition this worker holds (KEYS[12]) are taken: others are left
-- queued for a worker that holds it (or handed back, when their lease lapsed).
-- KEYS[1]  queue     zset fire -> due (or retry) time, ms
-- KEYS[2]  working   zset fire -> lease deadline, ms
-- KEYS[3]  attempts  hash fire -> attempt count = fencing token of the current claim
-- KEYS[4]  claims    hash fire -> JSON {worker, token, due, claimed_at[, reclaimed]}
-- KEYS[5]  jobs      hash job -> policy line (cronsvc/policy.py):
--                    digest|catch_up|deadline_ms|overlap|max_attempts|paused|definition|
--                    notify|pause_after|max_concurrent|limits ('db:3,gpu:1')|pool|then
-- KEYS[6]  paused    hash job -> JSON of a runtime pause
-- KEYS[7]  running   hash job (or '!' .. schedule id) -> fire in flight (overlap forbid/replace)
-- KEYS[8]  cancels   hash fire -> reason the holder must stop
-- KEYS[9]  events    list of JSON decisions, newest first, capped at 10000
-- KEYS[10] payloads  hash fire -> payload JSON of one-off fires
-- KEYS[11] dead      zset fire -> time it died, ms
-- KEYS[12] held      hash job -> definition digest, of the job file this worker runs
-- KEYS[13] schedules hash schedule id -> stored runtime schedule (cronsvc/schedule/runtime.py):
--                    its fires run with its payload and its overrides of the job's policy
-- KEYS[14] job_lines hash job -> policy line of every job, for fires of jobs this shard does
--                    not publish (a runtime schedule lives on the shard of its id); on one
--                    Redis it is KEYS[5] itself
-- KEYS[15] outbox    list of events to tell people about, newest first: lease_lost, dead,
--                    missed and skipped, for jobs whose policy line wants them
-- KEYS[16] failing   hash job -> fires failed in a row (for recovered and auto-pause)
-- KEYS[17] slots     hash 'o:' .. owner or 'l:' .. limit -> the fires holding its slots,
--                    '|'-separated (a fire not leased in KEYS[2] any more holds none);
--                    'w:' .. owner -> its one fire waiting for a slot (overlap queue)
-- KEYS[18] malformed list of entries set aside: a member of KEYS[1] or KEYS[2] that is not
--                    a fire id leaves it (with what KEYS[3], KEYS[4], KEYS[8] and KEYS[10]
--                    hold of it) and is kept here, once
-- ARGV[1]  now_ms, or '' for the server clock
-- ARGV[2]  worker id
-- ARGV[3]  batch: fires claimed at most (stale reclaims included)
-- ARGV[4]  lease_ms
-- ARGV[5]  scan_limit: due fires examined at most (>= batch)
-- ARGV[6]  unheld_ms: a due fire no worker with its definition took for this long is missed
-- ARGV[7]  '1': take fires of any definition (tools and tests draining a queue), else '0'
-- Returns one flat array (nested arrays make Redis write the reply in many small pieces):
--   now_ms, next_ms (-1: nothing queued or working),
--   n_claimed, then per claim: fire, token, due_ms, reclaimed 0/1, payload JSON or '',
--     the claim JSON of the holder whose lease lapsed (reclaimed) or '',
--   n_dropped, then per drop: fire, reason,
--   n_aside, then per member set aside: the member, the key it was in
-- A fire with attempts 0 (queued by hand: a backfill, a dead retry) is not judged by its
-- starting deadline nor catch_up, and waits for a slot its bounds do not have now.
-- Reasons: removed, 'schedule removed' (its runtime schedule was deleted or now runs another
-- job), paused, missed, 'catch_up latest', 'overlap forbid', dead (its lease
-- lapsed on the last attempt), 'dead: job removed' (lapsed after its job was removed),
-- 'definition not held' (a missed fire: no worker holding its definition took it in time).
-- next_ms skips due fires this worker cannot take: it comes back for the first fire due
-- later, and within a second while its scan found nothing it could take.
-- Writes are gathered and sent as one command per key: the cost per fire is mostly Lua.
-- @include now.lua
-- @include events.lua
-- @include fires.lua
-- @include outbox.lua
-- @include malformed.lua
-- @include bulk.lua
-- @include policies.lua
-- @include slots.lua
local queue, working, attempts, claims, jobs, paused, running, cancels, events, payloads,
  dead, held, schedules, job_lines, outbox, failing, slots, malformed =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
  KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18]
local worker_json = cjson.encode(ARGV[2])
local batch = tonumber(ARGV[3])
-- Lua formats numbers with sprintf on every use: turn the hot ones into strings once.
local now_s = string.format('%d', now)
local lease_until = string.format('%d', now + tonumber(ARGV[4]))
local scan = math.max(tonumber(ARGV[5]), batch)
local unheld_ms = tonumber(ARGV[6])
local any_definition = ARGV[7] == '1'
local RESCAN_MS = 1000
-- When to come back: the next due fire, or the next lease to expire; -1 if neither.
-- `skipping`: due fires were left for other workers, so look past what is due now.
-- A score below 0 (a member written by hand at -inf, say) is due now, not "nothing", and
-- one of +inf is a time a reply can carry.
local function clamped(score) return math.min(math.max(tonumber(score), 0), 2^53) end
local function next_due(skipping)
  local next_ms = -1
  local q
  if skipping then
    q = redis.call('ZRANGEBYSCORE', queue, '(' .. now_s, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  else
    q = redis.call('ZRANGE', queue, 0, 0, 'WITHSCORES')
  end
  if q[2] then next_ms = clamped(q[2]) end
  local w = redis.call('ZRANGE', working, 0, 0, 'WITHSCORES')
  if w[2] and (next_ms < 0 or clamped(w[2]) < next_ms) then next_ms = clamped(w[2]) end
  return next_ms
end

-- An idle fleet claims often and finds nothing: answer that with two reads.
local soonest = next_due(false)
if soonest < 0 or soonest > now then return {now, soonest, 0, 0, 0} end

local claimed, dropped = {}, {}
local w_args, a_args, c_args, gone = {}, {}, {}, {}
local nevents = 0

local policy = policy_reader(jobs, job_lines, held, paused, schedules, any_definition)

local function event(kind, fid, reason)
  add_event(events, cjson.encode({event = kind, fire = fid, reason = reason, at = now}))
  nevents = nevents + 1
end

-- What people are told of a fire this call decided about, if its job wants it.
local TOLD = {missed = 'missed', ['definition not held'] = 'missed',
  ['catch_up latest'] = 'skipped', ['overlap forbid'] = 'skipped'}
local function tell(p, kind, fid, job, attempt, reason)
  if p and wants(p.mask, kind) then
    redis.call('LPUSH', outbox, outbox_line({event = kind, job = job, fire = fid,
      attempt = attempt, at = now, reason = reason}))
  end
end

local bounds = slots_of(slots, running, working, now)

local claim_head = '{"worker":' .. worker_json .. ',"token":'
local claim_tail = ',"claimed_at":' .. now_s

-- token: the attempt number; due: a string of digits; before: the lapsed holder's claim;
-- owner: the job, or '!' .. schedule id (whose fire in flight overlap looks at).
local function take(fid, owner, due, token, p, reclaimed, before)
  local token_s = token == 1 and '1' or tostring(token)
  w_args[#w_args + 1] = lease_until
  w_args[#w_args + 1] = fid
  a_args[#a_args + 1] = fid
  a_args[#a_args + 1] = token_s
  c_args[#c_args + 1] = fid
  c_args[#c_args + 1] = claim_head .. token_s .. ',"due":' .. due
    .. claim_tail .. (reclaimed == 1 and ',"reclaimed":true}' or '}')
  if p then bounds.start(p, owner, fid) end
  claimed[#claimed + 1] = {fid, token, tonumber(due), reclaimed, p and p.payload or '',
    before or ''}
end

-- 1. Stale leases: the holder died or lost Redis; run the fire again with a higher token.
-- A holder dying is not the job failing, so a lost lease may use LOST_LEASE_EXTRA attempts
-- beyond the job's retries; a fire that keeps killing its workers still ends up dead.
local LOST_LEASE_EXTRA = 2
local aside = {}  -- members that are not fire ids: out of the queue and working set, kept
local function not_a_fire(key, fid)
  set_aside(malformed, key, fid, 'not a fire id', now)
  aside[#aside + 1] = {fid, key}
end
local stale = redis.call('ZRANGEBYSCORE', working, '-inf', now_s, 'LIMIT', 0, batch)
for i = #stale, 1, -1 do
  if not well_formed(stale[i]) then
    redis.call('ZREM', working, stale[i])
    not_a_fire(working, table.remove(stale, i))
  end
end
if #stale > 0 then
  local names, sids, entries = {}, {}, {}
  for i, fid in ipairs(stale) do
    local job, _, _, sid = split_fire(fid)
    names[i], sids[i] = job, sid or false
    if sid then entries[#entries + 1] = {sid, job} end
  end
  policy.load(names, entries)
  local used = redis.call('HMGET', attempts, unpack(stale))
  local before = redis.call('HMGET', claims, unpack(stale))
  for i, fid in ipairs(stale) do
    local job, n = names[i], tonumber(used[i]) or 0
    local p, schedule_gone = policy.of(job, sids[i])
    local owner = sids[i] and '!' .. sids[i] or owner_of(fid, job)
    if schedule_gone then
      -- Its schedule was deleted, or now runs another job: the run it had is not redone.
      redis.call('ZREM', working, fid)
      redis.call('HDEL', claims, fid)
      redis.call('HDEL', cancels, fid)
      gone[#gone + 1] = fid
      bounds.release(owner, fid)
      dropped[#dropped + 1] = {fid, 'schedule removed'}
      event('dropped', fid, 'schedule removed')
    elseif p and not p.held then
      -- Not this worker's to run: back to the queue at its due time, no attempt used, for a
      -- worker that holds its definition (the claim is kept: whoever takes it sees the holder).
      redis.call('ZREM', working, fid)
      redis.call('ZADD', queue, due_s_of(fid), fid)
      bounds.release(owner, fid)
      event('handed back', fid, 'lease lapsed; definition not held by ' .. ARGV[2])
    elseif not p or n >= p.max_attempts + LOST_LEASE_EXTRA then
      -- Attempts and payload stay, so the dead fire can be retried by hand.
      redis.call('ZREM', working, fid)
      redis.call('HDEL', claims, fid)
      redis.call('HDEL', cancels, fid)
      bounds.release(owner, fid)
      redis.call('ZADD', dead, now_s, fid)
      dropped[#dropped + 1] = {fid, p and 'dead' or 'dead: job removed'}
      event('dead', fid, p and 'lease lost on the last attempt' or 'job removed')
      tell(p, 'dead', fid, job, n, 'lease lost on the last attempt')
      if p and p.on_failure then
        chained(outbox, job, fid, '{"status":"dead","attempt":' .. n .. ',"started":'
          .. now_s .. '}', p.on_failure)
      end
      if p and tracks(p.mask, p.pause_after) then
        fire_failed(failing, paused, outbox, job, fid, p.pause_after, now)
      end
    elseif bounds.full(p, owner) then
      -- Its slot went with its lease and is taken now: back to the queue, no attempt used,
      -- until one is free (a retry is never judged by its starting deadline).
      redis.call('ZREM', working, fid)
      redis.call('ZADD', queue, due_s_of(fid), fid)
      bounds.release(owner, fid)
      event('handed back', fid, 'lease lapsed; ' .. bounds.full(p, owner))
    else
      take(fid, owner, due_s_of(fid), n + 1, p, 1, before[i])
      event('reclaimed', fid, nil)
      tell(p, 'lease_lost', fid, job, n, 'its worker stopped renewing the lease')
      if p and tracks(p.mask, p.pause_after) then attempt_failed(failing, job) end
    end
  end
end

-- 2. Due fires, in due order; every fire examined is claimed, dropped, or left for a worker
-- that holds its definition. Without the last, the examined ones are exactly the first ranks
-- of the queue.
local examined = 0
local skipped, leave = false, {}  -- fires left queued for workers holding their definition
local fires = {}
if #claimed < batch then
  fires = redis.call('ZRANGEBYSCORE', queue, '-inf', now_s, 'LIMIT', 0, scan)
  local parsed, latest = {}, {}
  for i, fid in ipairs(fires) do
    if well_formed(fid) then
      local job, due_s, oneoff, sid = split_fire(fid)
      local due = tonumber(due_s)
      local owner = sid and '!' .. sid or owner_of(fid, job)
      parsed[i] = {job, due_s, due, oneoff, sid, owner}
      if not oneoff and (latest[owner] == nil or due > latest[owner]) then latest[owner] = due end
    else
      parsed[i] = false  -- set aside when examined, and removed with the others examined
    end
  end
  while #claimed < batch and examined < #fires do
    -- One slice at a time, the size still missing: drops are rare, so usually one slice.
    local first, last = examined + 1, math.min(#fires, examined + batch - #claimed)
    local ids, names, entries = {}, {}, {}
    for i = first, last do
      ids[#ids + 1] = fires[i]
      if parsed[i] then
        names[#names + 1] = parsed[i][1]
        if parsed[i][5] then entries[#entries + 1] = {parsed[i][5], parsed[i][1]} end
      end
    end
    policy.load(names, entries)
    local used = redis.call('HMGET', attempts, unpack(ids))
    for i = first, last do
      local fid = fires[i]
      if not parsed[i] then
        not_a_fire(queue, fid)
      else
        local job, due_s, due, oneoff = parsed[i][1], parsed[i][2], parsed[i][3], parsed[i][4]
        local sid, owner = parsed[i][5], parsed[i][6]
        local p, schedule_gone = policy.of(job, sid)
        local n = tonumber(used[i - first + 1])
        local reason = nil
        -- Starting deadlines and catch-up judge a fire's first start only, never its retries.
        if not p then
          reason = schedule_gone and 'schedule removed' or 'removed'
        elseif p.paused and not oneoff then
          reason = 'paused'
        elseif not n and p.deadline > 0 and now - due > p.deadline then
          reason = 'missed'
        elseif not p.held then
          if now - due > unheld_ms then
            reason = 'definition not held'
          else
            skipped = true
            leave[fid] = true
          end
        elseif not n and not oneoff and p.catch_up == 'latest' and latest[owner] > due then
          reason = 'catch_up latest'
        else
          -- Bounds: overlap (one run of the owner), max_concurrent and named limits.
          local verdict, ahead = bounds.admit(p, owner, fid, n == 0, queue)
          if verdict == 'drop' then
            reason = ahead
          elseif verdict == 'replace' then
            redis.call('HSET', cancels, ahead, 'replaced')
            event('cancelled', ahead, 'replaced by ' .. fid)
          elseif verdict then
            skipped = true
            leave[fid] = true
            if verdict == 'queued' then
              -- Said once, when it starts waiting: the worker writes it to the history.
              dropped[#dropped + 1] = {fid, 'queued behind ' .. ahead}
              event('held', fid, 'queued behind ' .. ahead)
            end
          end
        end
        if leave[fid] then
          -- stays queued, unseen by this worker
        elseif reason then
          if n then gone[#gone + 1] = fid end
          dropped[#dropped + 1] = {fid, reason}
          event('dropped', fid, reason)
          if TOLD[reason] then tell(p, TOLD[reason], fid, job, nil, reason) end
        else
          -- A claim left behind: the lease of its holder lapsed and the fire was handed back.
          local before = n and redis.call('HGET', claims, fid) or nil
          take(fid, owner, due_s, (n or 0) + 1, p, before and 1 or 0, before)
        end
      end
    end
    examined = last
  end
end

if examined > 0 and not skipped then
  redis.call('ZREMRANGEBYRANK', queue, 0, examined - 1)
elseif examined > 0 then
  local taken = {}
  for i = 1, examined do
    if not leave[fires[i]] then taken[#taken + 1] = fires[i] end
  end
  if #taken > 0 then bulk('ZREM', queue, taken, 1) end
end
if #w_args > 0 then
  bulk('ZADD', working, w_args, 2)
  bulk('HSET', attempts, a_args, 2)
  bulk('HSET', claims, c_args, 2)
  if redis.call('HLEN', payloads) > 0 then
    local ids = {}
    for i, c in ipairs(claimed) do ids[i] = c[1] end
    local given = redis.call('HMGET', payloads, unpack(ids))
    for i, c in ipairs(claimed) do c[5] = given[i] or c[5] end
  end
end
if #gone > 0 then bulk('HDEL', attempts, gone, 1) end
if #aside > 0 then
  local members = {}
  for i, a in ipairs(aside) do members[i] = a[1] end
  for _, key in ipairs({attempts, claims, cancels, payloads}) do bulk('HDEL', key, members, 1) end
end
if #dropped > 0 and redis.call('HLEN', payloads) > 0 then
  local ids = {}
  for i, d in ipairs(dropped) do
    local head = string.sub(d[2], 1, 6)
    if head ~= 'dead' and head ~= 'dead: ' and head ~= 'queued' then ids[#ids + 1] = d[1] end
  end
  if #ids > 0 then bulk('HDEL', payloads, ids, 1) end
end
if nevents > 0 then trim_events(events) end
bounds.save()

-- 3. When to come back.
local next_ms = next_due(skipped)
if skipped and (examined >= scan or #claimed >= batch)
    and (next_ms < 0 or next_ms > now + RESCAN_MS) then
  next_ms = now + RESCAN_MS  -- more may be due past what this call looked at
end
local out = {now, next_ms, #claimed}
for _, c in ipairs(claimed) do
  for j = 1, 6 do out[#out + 1] = c[j] end
end
out[#out + 1] = #dropped
for _, d in ipairs(dropped) do
  out[#out + 1] = d[1]
  out[#out + 1] = d[2]
end
out[#out + 1] = #aside
for _, a in ipairs(aside) do
  out[#out + 1] = a[1]
  out[#out + 1] = a[2]
end
return out
