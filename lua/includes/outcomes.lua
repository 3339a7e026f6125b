-- outcomes: what a claim decided about the fires it did not simply take, said and kept: in
-- the events list (events.lua), in the outbox when the job wants it told (outbox.lua), and
-- in the claim's reply; at the end, what a dropped fire or a member set aside leaves in
-- other hashes goes, with one command per key. p below is a policy of policies.lua, or nil.
--   outcomes_of(events, outbox, malformed, failing, paused, now)  the outcomes of one call,
--                      into those keys; a table of:
--     dropped, aside   the reply's lists, {fid, reason} and {member, key} each
--     event(kind, fid, reason)  a decision, in the events list
--     drop(fid, reason, p, job, attempted)  fid will not run: said (and told, for the
--                      reasons people are told of); attempted: it has attempts, to go too
--     died(fid, p, job, n)  fid's lease lapsed on its last attempt n (or its job is gone):
--                      dead, said and told, its failure counted and chained
--     reclaimed(fid, p, job, n)  fid's lease lapsed on attempt n and it runs again
--     held(fid, ahead)  fid waits behind the run of ahead (overlap queue): said once
--     set_aside(key, member)  a member of key is not a fire id: kept in malformed
--     clean(attempts, claims, cancels, payloads)  remove what the outcomes leave: the
--                      attempts of the drops attempted, their payloads (a dead fire keeps
--                      its for a retry by hand, a waiting one for its run), and all of a
--                      member set aside; then cap the events list
-- @include events.lua
-- @include outbox.lua
-- @include malformed.lua
-- @include bulk.lua
local function outcomes_of(events, outbox, malformed, failing, paused, now)
  local dropped, aside, gone, spent, nevents = {}, {}, {}, {}, 0
  -- What people are told of a fire dropped for these reasons, if its job wants it.
  local TOLD = {missed = 'missed', ['definition not held'] = 'missed',
    ['catch_up latest'] = 'skipped', ['overlap forbid'] = 'skipped'}

  local function event(kind, fid, reason)
    add_event(events, cjson.encode({event = kind, fire = fid, reason = reason, at = now}))
    nevents = nevents + 1
  end
  local function tell(p, kind, fid, job, attempt, reason)
    if p and wants(p.mask, kind) then
      redis.call('LPUSH', outbox, outbox_line({event = kind, job = job, fire = fid,
        attempt = attempt, at = now, reason = reason}))
    end
  end

  local function drop(fid, reason, p, job, attempted)
    if attempted then gone[#gone + 1] = fid end
    spent[#spent + 1] = fid
    dropped[#dropped + 1] = {fid, reason}
    event('dropped', fid, reason)
    if TOLD[reason] then tell(p, TOLD[reason], fid, job, nil, reason) end
  end
  local function died(fid, p, job, n)
    dropped[#dropped + 1] = {fid, p and 'dead' or 'dead: job removed'}
    event('dead', fid, p and 'lease lost on the last attempt' or 'job removed')
    tell(p, 'dead', fid, job, n, 'lease lost on the last attempt')
    if p and p.on_failure then
      chained(outbox, job, fid, '{"status":"dead","attempt":' .. n .. ',"started":'
        .. string.format('%d', now) .. '}', p.on_failure)
    end
    if p and tracks(p.mask, p.pause_after) then
      fire_failed(failing, paused, outbox, job, fid, p.pause_after, now)
    end
  end
  local function reclaimed(fid, p, job, n)
    event('reclaimed', fid, nil)
    tell(p, 'lease_lost', fid, job, n, 'its worker stopped renewing the lease')
    if tracks(p.mask, p.pause_after) then attempt_failed(failing, job) end
  end
  local function held(fid, ahead)
    -- The worker writes it to the history.
    dropped[#dropped + 1] = {fid, 'queued behind ' .. ahead}
    event('held', fid, 'queued behind ' .. ahead)
  end
  local function aside_one(key, member)
    set_aside(malformed, key, member, 'not a fire id', now)
    aside[#aside + 1] = {member, key}
  end

  local function clean(attempts, claims, cancels, payloads)
    bulk('HDEL', attempts, gone, 1)
    if #aside > 0 then
      local members = {}
      for i, a in ipairs(aside) do members[i] = a[1] end
      for _, key in ipairs({attempts, claims, cancels, payloads}) do
        bulk('HDEL', key, members, 1)
      end
    end
    if #dropped > 0 and redis.call('HLEN', payloads) > 0 then bulk('HDEL', payloads, spent, 1) end
    if nevents > 0 then trim_events(events) end
  end

  return {dropped = dropped, aside = aside, event = event, drop = drop, died = died,
    reclaimed = reclaimed, held = held, set_aside = aside_one, clean = clean}
end
