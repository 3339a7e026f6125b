-- slots: what may run at once. Overlap allows one fire of an owner in flight (the job, or
-- '!' .. schedule id, or a host's run's: owner_of in fires.lua), kept in a hash owner ->
-- fire (Keys.running); max_concurrent (of an owner) and named limits are slots, in a hash of
-- their own (Keys.slots):
--   'o:' .. owner or 'l:' .. limit -> the fires holding its slots, '|'-separated; a fire
--                      holds one while its lease (in the working set) runs
--   'w:' .. owner -> its one fire waiting for a slot (overlap queue); a second is dropped
-- A claim reads each field once, when first needed, and writes the slots it changed at its
-- end. p below is a policy of policies.lua (overlap, most, limits, bounded).
--   slots_of(key, running, working, now)  the slots of hash `key` and the fires in flight
--                      of hash `running`, leases read in zset `working`; a table of:
--     full(p, owner)   why a fire of owner cannot start now (a bound of p is full) and a
--                      fire in the way; nil when every bound has a free slot
--     admit(p, owner, fid, asked, queue)  what the bounds say of starting fid, a due fire
--                      of owner waiting in zset `queue`; asked: queued by hand with
--                      attempts 0 (a backfill, a dead retry), so it waits for its slot,
--                      neither dropped (forbid) nor stopping the run in its way (replace):
--                      nil: start it; 'replace', ahead: start it, ahead (in the way) to be
--                      cancelled; 'wait': leave it queued; 'queued', ahead: it waits
--                      behind ahead from now on (to be said once); 'drop', reason
--     start(p, owner, fid)  fid starts: owner's fire in flight (overlap other than allow),
--                      holding a slot of each bound of p, waiting no more
--     release(owner, fid)  fid, whose lease lapsed, is not owner's fire in flight any more
--     save()           write the slots changed
local function slots_of(key, running, working, now)
  local fires, changed, waiting, holders = {}, {}, {}, {}

  -- The fires holding the slots of field: those whose lease runs.
  local function holding(field)
    local list = fires[field]
    if list == nil then
      list = {}
      local raw = redis.call('HGET', key, field)
      if raw then
        local seen = 0
        for fid in string.gmatch(raw, '[^|]+') do
          seen = seen + 1
          local lease = redis.call('ZSCORE', working, fid)
          if lease and tonumber(lease) >= now then list[#list + 1] = fid end
        end
        if seen ~= #list then changed[field] = true end
      end
      fires[field] = list
    end
    return list
  end

  local function full(p, owner)
    if not p.bounded then return nil end
    if p.most > 0 then
      local h = holding('o:' .. owner)
      if #h >= p.most then
        return 'max_concurrent ' .. p.most .. ' (' .. #h .. ' running)', h[1]
      end
    end
    for _, l in ipairs(p.limits) do
      local h = holding('l:' .. l.name)
      if #h >= l.cap then return 'limit ' .. l.name .. ' (' .. #h .. ' running)', h[1] end
    end
    return nil
  end

  local function hold(p, owner, fid)
    local fields = {}
    if p.most > 0 then fields[1] = 'o:' .. owner end
    for _, l in ipairs(p.limits) do fields[#fields + 1] = 'l:' .. l.name end
    for _, field in ipairs(fields) do
      local h = holding(field)
      h[#h + 1] = fid
      changed[field] = true
    end
  end

  local function waiter(owner)
    if waiting[owner] == nil then
      waiting[owner] = redis.call('HGET', key, 'w:' .. owner) or false
    end
    return waiting[owner]
  end

  -- The fire of owner in flight, if its lease is still held (or this call took it).
  local function holder(owner)
    if holders[owner] then return holders[owner] end
    local current = redis.call('HGET', running, owner)
    if current and redis.call('ZSCORE', working, current) then return current end
    return nil
  end

  local function admit(p, owner, fid, asked, queue)
    local why, ahead
    if p.overlap ~= 'allow' and p.most == 0 then
      ahead = holder(owner)
      if ahead and asked then
        why = 'overlap ' .. p.overlap
      elseif ahead and p.overlap == 'forbid' then
        return 'drop', 'overlap forbid'
      elseif ahead and p.overlap == 'replace' then
        return 'replace', ahead
      elseif ahead then
        why = 'overlap queue'
      end
    end
    if not why and p.bounded and (p.overlap ~= 'replace' or asked) then
      why, ahead = full(p, owner)
    end
    if not why then return nil end
    if asked then return 'wait' end
    if p.overlap ~= 'queue' then return 'drop', why end
    local w = waiter(owner)
    if w and w ~= fid and redis.call('ZSCORE', queue, w) then
      return 'drop', 'overlap queue: ' .. w .. ' waits already'
    end
    if w == fid then return 'wait' end
    redis.call('HSET', key, 'w:' .. owner, fid)
    waiting[owner] = fid
    return 'queued', ahead
  end

  local function start(p, owner, fid)
    if p.overlap ~= 'allow' then
      redis.call('HSET', running, owner, fid)
      holders[owner] = fid
    end
    if p.bounded then hold(p, owner, fid) end
    if p.overlap == 'queue' and waiter(owner) == fid then
      redis.call('HDEL', key, 'w:' .. owner)
      waiting[owner] = false
    end
  end

  local function release(owner, fid)
    if redis.call('HGET', running, owner) == fid then redis.call('HDEL', running, owner) end
  end

  local function save()
    for field in pairs(changed) do
      local list = fires[field]
      if #list > 0 then
        redis.call('HSET', key, field, table.concat(list, '|'))
      else
        redis.call('HDEL', key, field)
      end
    end
  end

  return {full = full, admit = admit, start = start, release = release, save = save}
end
