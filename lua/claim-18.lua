-- claim: stale fires first, then due fires, up to a batch; drop what policy says not to run.
-- Only fires whose job definition this worker holds (KEYS[12]) are taken: others are left
-- queued for a worker that holds it (or handed back, when their lease lapsed).
-- KEYS[1]  queue     zset fire -> due (or retry) time, ms
-- KEYS[2]  working   zset fire -> lease deadline, ms
-- KEYS[3]  attempts  hash fire -> attempt count = fencing token of the current claim
-- KEYS[4]  claims    hash fire -> JSON {worker, token, due, claimed_at[, reclaimed]}
-- KEYS[5]  jobs      hash job -> policy line (cronsvc/policy.py; read by includes/policy.lua)
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
-- KEYS[17] slots     hash of the fires holding the slots of an owner or a limit, and of the
--                    fire of an owner waiting for one (includes/slots.lua)
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
-- ARGV[8]  ahead_ms: also take fires due within this long, started at their due time by the
--          worker (see 2b); absent or 0: none
-- ARGV[9]  prefetch, with batch 0: a worker with no free slot takes up to this many fires
--          due within ahead_ms (2b), each waiting in it for a slot; none while a fire is due
--          now (those are for a worker with a free slot, and come first). Absent: 0
-- Returns one flat array (nested arrays make Redis write the reply in many small pieces):
--   now_ms, next_ms (-1: nothing queued or working),
--   n_claimed, then per claim: fire, token, due_ms (digits),
--   n_payloads, then per claim with a payload (most have none), in order: its number among
--     the claims (from 1), the payload JSON,
--   n_reclaimed, then per claim of a lease that lapsed (reclaimed): its number, the claim
--     JSON of the holder whose lease lapsed or '',
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
-- @include fires.lua
-- @include bulk.lua
-- @include policies.lua
-- @include slots.lua
-- @include leases.lua
-- @include outcomes.lua
-- @include wake.lua
local queue, working, attempts, claims, jobs, paused, running, cancels, events, payloads,
  dead, held, schedules, job_lines, outbox, failing, slots, malformed =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
  KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17], KEYS[18]
local worker, batch, unheld_ms = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[6])
local ahead_ms = tonumber(ARGV[8] or '') or 0
-- A prefetch (batch 0) takes fires ahead only: no lapsed lease, no due fire.
local prefetch = batch == 0 and (tonumber(ARGV[9] or '') or 0) or 0
local find, sub, byte = string.find, string.sub, string.byte
local scan = math.max(tonumber(ARGV[5]), batch)
local now_s = string.format('%d', now)  -- made once: Lua runs sprintf on every use
local RESCAN_MS = 1000
-- A holder dying is not the job failing, so a lost lease may use LOST_LEASE_EXTRA attempts
-- beyond the job's retries; a fire that keeps killing its workers still ends up dead.
local LOST_LEASE_EXTRA = 2

-- Leases lapsed, and (when none did) the first due fires: an idle fleet claims often and
-- finds neither, answered then with two more reads (when to come back).
-- (Numbers given to redis.call are formatted with sprintf each time: ARGV[3] is the batch.)
local stale = batch > 0 and
  redis.call('ZRANGEBYSCORE', working, '-inf', now_s, 'LIMIT', '0', ARGV[3]) or {}
local first_due, early  -- the due fires' first read, made here when no lease lapsed
-- The fires due within ahead_ms (after now), with their scores: member, score, ...
local function read_early(n)
  return redis.call('ZRANGEBYSCORE', queue, '(' .. now_s, now + ahead_ms, 'WITHSCORES', 'LIMIT', '0', n)
end
if #stale == 0 then
  first_due = redis.call('ZRANGEBYSCORE', queue, '-inf', now_s, 'LIMIT', '0',
    batch > 0 and ARGV[3] or '1')
  if #first_due == 0 then
    early = ahead_ms > 0 and read_early(batch > 0 and ARGV[3] or prefetch)
    if not early or #early == 0 then
      return {now, next_due(queue, working, false), 0, 0, 0, 0, 0}
    end
  elseif batch == 0 then  -- a prefetch, while a fire is due: nothing
    return {now, next_due(queue, working, false), 0, 0, 0, 0, 0}
  end
end

local policy = policy_reader(jobs, job_lines, held, paused, schedules, ARGV[7] == '1')
local of_job = policy.of_job
-- The slots and the outcomes are made when first asked for: a claim of fires whose jobs
-- allow overlap and have no limit, that drops none, needs neither.
local bounded, recorded
local function bounds()
  if not bounded then bounded = slots_of(slots, running, working, now) end
  return bounded
end
local leases = leases_of(worker, now, now_s, tonumber(ARGV[4]))
local lease = leases.take
local function record()
  if not recorded then
    recorded = outcomes_of(events, outbox, malformed, failing, paused, now)
  end
  return recorded
end
-- Fire fid of owner, due at due_s (digits), taken as attempt `token`: leased, and in flight
-- in its owner's overlap and slots.
local function take(fid, due_s, owner, token, p, reclaimed, before)
  leases.take(fid, due_s, token, reclaimed, before, p.payload)
  if not p.free then bounds().start(p, owner, fid) end
end
-- A lapsed lease handed back: queued at its due time again, no attempt used.
local function hand_back(f, why)
  redis.call('ZREM', working, f.fid)
  redis.call('ZADD', queue, f.due_s, f.fid)
  bounds().release(f.owner, f.fid)
  record().event('handed back', f.fid, 'lease lapsed; ' .. why)
end

-- 1. Stale leases: the holder died or lost Redis; run the fire again with a higher token.
for i = #stale, 1, -1 do
  if not well_formed(stale[i]) then
    redis.call('ZREM', working, stale[i])
    record().set_aside(working, table.remove(stale, i))
  end
end
if #stale > 0 then
  local lapsed = {}
  local lapsed_jobs = {}
  for i, fid in ipairs(stale) do
    lapsed[i] = fire_parts(fid)
    lapsed_jobs[i] = lapsed[i].job
  end
  policy.load(lapsed_jobs, lapsed, 1, #lapsed)
  local used = redis.call('HMGET', attempts, unpack(stale))
  local before = redis.call('HMGET', claims, unpack(stale))
  for i, f in ipairs(lapsed) do
    local fid, job, n = f.fid, f.job, tonumber(used[i]) or 0
    local p, schedule_gone = policy.of(f)
    if p and not p.held then
      -- Not this worker's to run, but a worker's that holds its definition (the claim is
      -- kept: whoever takes it sees the holder).
      hand_back(f, 'definition not held by ' .. worker)
    elseif not p or n >= p.max_attempts + LOST_LEASE_EXTRA then
      -- Given up: its claim, cancel and place in flight go with its lease.
      redis.call('ZREM', working, fid)
      redis.call('HDEL', claims, fid)
      redis.call('HDEL', cancels, fid)
      bounds().release(f.owner, fid)
      if schedule_gone then
        -- Its schedule was deleted, or now runs another job: the run it had is not redone.
        record().drop(fid, 'schedule removed', p, job, true)
      else
        -- Attempts and payload stay, so the dead fire can be retried by hand.
        redis.call('ZADD', dead, now_s, fid)
        record().died(fid, p, job, n)
      end
    elseif bounds().full(p, f.owner) then
      -- Its slot went with its lease and is taken now: back until one is free (a retry is
      -- never judged by its starting deadline).
      hand_back(f, bounds().full(p, f.owner))
    else
      take(fid, f.due_s, f.owner, n + 1, p, 1, before[i])
      record().reclaimed(fid, p, job, n)
    end
  end
end

-- 2. Due fires, in due order; every fire examined is claimed, dropped, or left queued (for
-- a worker that holds its definition, or for a slot). Without the last, the examined ones
-- are exactly the first ranks of the queue.
-- The scan is read and split as far as it is needed: the first slice alone, the rest of it
-- only once a slice falls short or a 'catch_up latest' fire asks for its owner's last fire
-- due (nothing writes the queue before step 3, so the ranks read later are the same).
local examined, skipped, leave, fires = 0, false, {}, {}
if leases.count() < batch then
  local want = batch - leases.count()
  -- No lease lapsed: the fires were read above (want is batch).
  fires = first_due or redis.call('ZRANGEBYSCORE', queue, '-inf', now_s, 'LIMIT', '0', want)
  local complete = #fires < want or want >= scan  -- the whole scan is read
  -- The fires split: of the i-th, its job (false: not a fire id, set aside) and due time
  -- (digits); and for a fire that is not '<job>@<due_ms>' (a one-off, a runtime schedule's,
  -- a host's run), its fire_parts table: most fires cost no table of their own.
  local jobs_at, dues_at, parts_at, latest, latest_built = {}, {}, {}, nil, false  -- see latest_of
  -- A due time's digits as a number: fires due together come in a run (a burst, the jobs of
  -- one second), and tonumber runs strtod, slow on 13 digits.
  local last_s, last_n
  local function due_n(s)
    if s ~= last_s then last_s, last_n = s, tonumber(s) end
    return last_n
  end
  local function read_rest()
    if complete then return end
    complete = true
    local n = #fires
    local more = redis.call('ZRANGEBYSCORE', queue, '-inf', now_s, 'LIMIT', n, scan - n)
    for i, fid in ipairs(more) do fires[n + i] = fid end
  end
  local function split(first, last)
    for i = first, last do
      if jobs_at[i] == nil then
        local job, due_s, f = fire_split(fires[i])
        if job then
          jobs_at[i], dues_at[i] = job, due_s
          if f then parts_at[i] = f end  -- (a nil stored would make a slot)
        else
          jobs_at[i] = false
        end
      end
    end
  end
  -- latest_of(i): latest, owner -> the last cron fire due of each owner asked about in the
  -- scan, made for fire i's slice: of the fires split so far (the slices, up to `split_to`;
  -- a fire up to there reads latest itself), and of the others whose owner is one of theirs.
  -- Those are read for their owner only (most are split by the next claim again), and first
  -- by two plain finds: a fire id's first '!' begins its schedule's owner, else its owner is
  -- what comes before '@' (no job name nor schedule id holds either); one whose candidate
  -- is no owner of the slices' is not looked at further. The rest, and a host's run ('!@'),
  -- are taken as fire_owner and fire_split take them. An owner of a fire split later (a
  -- further slice) is looked for in the whole scan again. When the first slice's fires are
  -- all due at one time, the others are only those of the scan scored after it (due_later).
  local split_to, whole = 0, false
  -- fid into latest, as its owner and due time say (i: its place in fires, or nil)
  local function fold(fid, i)
    local due_s, o
    if not i or jobs_at[i] == nil then due_s, o = fire_owner(fid) end
    if not due_s then
      local f, job
      if i then
        split(i, i)
        f, job, due_s = parts_at[i], jobs_at[i], dues_at[i]
      else
        job, due_s, f = fire_split(fid)
      end
      if job and not (f and f.oneoff) then o = f and f.owner or job else due_s = nil end
    end
    if due_s then
      local due = due_n(due_s)
      if (latest[o] or -1) < due then latest[o] = due end
    end
  end
  -- Whether fid may be a fire of an owner in latest: one whose candidate owner is no
  -- owner of the slices' is not looked at further (see latest_of).
  local function asks(fid)
    local bang, o = find(fid, '!', 1, true), nil
    if not bang then
      local at = find(fid, '@', 1, true)
      if at then o = sub(fid, 1, at - 1) end
    elseif byte(fid, bang + 1) ~= 64 then
      o = sub(fid, bang)
    end
    return (o == nil and bang) or (o and latest[o])
  end
  -- The fires of the rest of the scan that may be due after the fires split so far, when
  -- those are all due at one time m and the queue scores them there (a burst): a fire's
  -- score is never below its due time (the planners score a fire at it; a retry, a
  -- backfill, a dead retry later), so a fire of the rest scored m is due by m and drops
  -- none of them. They are the fires scored after m up to the scan's end: ZCOUNT says how
  -- many ranks are scored up to m (at least the split ones, else nil: read the rest).
  -- In a burst that is none, and the rest of the scan is not read at all.
  local function due_later()
    local m = dues_at[1]
    if not m then return nil end
    for k = 2, #fires do
      local due_s = dues_at[k]
      if jobs_at[k] == nil then break end
      if due_s and due_s ~= m then return nil end
    end
    local upto = redis.call('ZCOUNT', queue, '-inf', m)
    if upto < #fires then return nil end  -- a split fire is scored after m
    if upto >= scan then return {} end
    return redis.call('ZRANGEBYSCORE', queue, '(' .. m, now_s, 'LIMIT', '0', scan - upto)
  end
  local function latest_of(i)
    if not latest or (i > split_to and not whole) then
      local later = not latest_built and not complete and due_later()
      if not later then read_rest() end
      latest = {}
      if latest_built then whole = true end
      latest_built = true
      for k = 1, #fires do
        local job = jobs_at[k]
        if job == nil then break end
        local f = parts_at[k]
        if job and not (f and f.oneoff) then
          local o, due_s = f and f.owner or job, dues_at[k]
          if due_s ~= last_s then last_s, last_n = due_s, tonumber(due_s) end  -- (due_n)
          if (latest[o] or -1) < last_n then latest[o] = last_n end
        end
        split_to = k
      end
      for k = split_to + 1, #fires do
        local fid = fires[k]
        if whole or asks(fid) then fold(fid, k) end
      end
      if later then
        for _, fid in ipairs(later) do
          if asks(fid) then fold(fid) end
        end
      end
    end
    return latest
  end
  while leases.count() < batch do
    if examined >= #fires then read_rest() end
    if examined >= #fires then break end
    -- One slice at a time, the size still missing: drops are rare, so usually one slice.
    local first, last = examined + 1, math.min(#fires, examined + batch - leases.count())
    split(first, last)
    policy.load(jobs_at, parts_at, first, last)
    local used = redis.call('HMGET', attempts, unpack(fires, first, last))
    for i = first, last do
      local fid, job, f, n = fires[i], jobs_at[i], parts_at[i], used[i - first + 1]
      n = n and tonumber(n)  -- most fires were never tried: no tonumber of nothing
      local due_s, oneoff, owner = dues_at[i], f and f.oneoff, f and f.owner or job
      local p, schedule_gone, reason, wait, ahead
      if job then  -- (policy.of, inline: a schedule's fire has its policy in its table)
        p = of_job[job]
        if p and f and f.sid then p = f.policy; schedule_gone = not p end
      end
      if not job then
        record().set_aside(queue, fid)
      elseif not p then
        reason = schedule_gone and 'schedule removed' or 'removed'
      elseif p.paused and not oneoff then
        reason = 'paused'
      -- Starting deadlines and catch-up judge a fire's first start only, never its retries.
      elseif not n and p.deadline > 0 and now - due_n(due_s) > p.deadline then
        reason = 'missed'
      elseif not p.held then
        if now - due_n(due_s) > unheld_ms then reason = 'definition not held'
        else wait = 'wait' end
      elseif not n and not oneoff and p.catch_up == 'latest'
          and (i <= split_to and latest or latest_of(i))[owner] > due_n(due_s) then
        reason = 'catch_up latest'
      elseif not p.free then
        -- Bounds: overlap (one run of the owner), max_concurrent and named limits.
        local verdict, detail = bounds().admit(p, owner, fid, n == 0, queue)
        if verdict == 'drop' then
          reason = detail
        elseif verdict == 'replace' then
          redis.call('HSET', cancels, detail, 'replaced')
          record().event('cancelled', detail, 'replaced by ' .. fid)
        else
          wait, ahead = verdict, detail
        end
      end
      if wait then
        skipped, leave[fid] = true, true  -- stays queued, unseen by this worker
        if wait == 'queued' then record().held(fid, ahead) end
      elseif reason then
        record().drop(fid, reason, p, job, n)
      elseif job then
        -- A claim left behind: the lease of its holder lapsed and the fire was handed back.
        local before = n and redis.call('HGET', claims, fid) or nil
        lease(fid, due_s, (n or 0) + 1, before and 1 or 0, before, p.payload)  -- (take, inline)
        if not p.free then bounds().start(p, owner, fid) end
      end
    end
    examined = last
  end
end

-- 2b. Ahead: fires due within ahead_ms, taken now, each started by the worker at its due
-- time. Only once every due fire is taken (none left queued, none unread), and only fires no
-- judgement of their due time could hold back: never tried, queued at their own due time,
-- definition held, not paused, free (no overlap rule, slot nor limit), of no runtime
-- schedule (its delete or change before the due time unqueues the fire: it must be queued).
-- (catch_up latest holds none back: no fire of its owner is due before it any more, and a
-- later one is not due by its due time.) Any other stays queued for the claim at its due
-- time (next_ms). A prefetch (batch 0) takes them up to its own count.
local took_early = {}
local ahead_max = batch > 0 and batch or prefetch
if ahead_ms > 0 and not skipped and leases.count() < ahead_max
    and (#fires < scan or batch == 0) then
  early = early or read_early(ahead_max - leases.count())
  local fids, jobs_e, parts_e, dues_e = {}, {}, {}, {}
  for i = 1, #early, 2 do
    local job, due_s, f = fire_split(early[i])
    if job and due_s == early[i + 1] and not (f and f.sid) then
      local k = #fids + 1
      fids[k], jobs_e[k], parts_e[k], dues_e[k] = early[i], job, f, due_s
    end
  end
  if #fids > 0 then
    policy.load(jobs_e, parts_e, 1, #fids)
    local used = redis.call('HMGET', attempts, unpack(fids))
    for k, fid in ipairs(fids) do
      local f = parts_e[k]
      local p = of_job[jobs_e[k]]
      if p and not used[k] and p.held and not p.paused and p.free then
        take(fid, dues_e[k], f and f.owner or jobs_e[k], 1, p, 0, nil)
        took_early[#took_early + 1] = fid
      end
    end
  end
end

-- 3. The writes, one command per key.
if examined > 0 and not skipped then
  redis.call('ZREMRANGEBYRANK', queue, '0', examined - 1)
elseif examined > 0 then
  local taken = {}
  for i = 1, examined do
    if not leave[fires[i]] then taken[#taken + 1] = fires[i] end
  end
  bulk('ZREM', queue, taken, 1)
end
if #took_early > 0 then bulk('ZREM', queue, took_early, 1) end  -- ranks after the due ones
leases.write(working, attempts, claims, payloads)
if recorded then recorded.clean(attempts, claims, cancels, payloads) end
if bounded then bounded.save() end

-- 4. When to come back.
local next_ms = next_due(queue, working, skipped and now_s)
if skipped and (examined >= scan or leases.count() >= batch)
    and (next_ms < 0 or next_ms > now + RESCAN_MS) then
  next_ms = now + RESCAN_MS  -- more may be due past what this call looked at
end
local out = leases.rows  -- the claims are in place already
out[1], out[2], out[3] = now, next_ms, leases.count()
local n = leases.more(out, 3 + 3 * leases.count())
local none = {}
for _, rows in ipairs({recorded and recorded.dropped or none,
                       recorded and recorded.aside or none}) do
  n = n + 1
  out[n] = #rows
  for _, row in ipairs(rows) do
    out[n + 1], out[n + 2] = row[1], row[2]
    n = n + 2
  end
end
return out
