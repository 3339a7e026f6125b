-- ran: the record of fires that ran (cronsvc/ran.py): per owner (the job, or '!' .. schedule
-- id) per period of 2^30 ms, one string of the due times' offsets in the period, 4 bytes
-- each, big-endian; kept until `reach` ms after its period ends.
--   record_ran(key, entry, fid, period, reach)  fid ran: append its entry (4 bytes, from
--                       cronsvc/ran.py; '' for a fire that is not recorded), or the entries
--                       of fires of one record from fid on, concatenated, to their record
--                       string `key`, whose expiry the first entries set
--                       (a string made by the entries is written with its expiry in one
--                       SET ... PXAT NX, one already there takes an APPEND: which is tried
--                       first is what the call's last record_ran needed, since a call's
--                       fires are mostly alike: a burst of schedules' first runs each make a
--                       string, the runs of jobs in their period append to theirs)
--   ran_fresh, ran_until(fid, period, reach)  for a caller that inlines record_ran's common
--                       case (ran_fresh false: an APPEND, and when that made the string,
--                       ran_fresh set and its expiry, ran_until's digits, set)
--   ran_test(key, start, asks)  a function: whether the record string `key`, of the period
--                       starting at `start` ms, holds a due time; `asks`, how many it will
--                       be asked about: a few are looked up in the string (a period of a
--                       minutely job is 70 KB, too much to decode per fire fed), many from
--                       a set of all of them built once
local record_ran, ran_until, ran_test
local ran_fresh = false  -- the last record string written was made by its entries
do
  local match, find, pack4, unpack4 = string.match, string.find, struct.pack, struct.unpack
  local FEW = 16
  -- When the record string of fid's period expires (ms, digits), made once per due time: the
  -- fires of a call are often due together.
  local last_due_s, last_until
  function ran_until(fid, period, reach)
    local due_s = match(fid, '@(%d+)')
    if due_s ~= last_due_s then
      local due = tonumber(due_s)
      last_due_s, last_until = due_s, string.format('%d', due - due % period + period + reach)
    end
    return last_until
  end
  function record_ran(key, entry, fid, period, reach)
    if entry == '' then return end
    if ran_fresh then
      if redis.call('SET', key, entry, 'PXAT', ran_until(fid, period, reach), 'NX') then return end
      ran_fresh = false
      redis.call('APPEND', key, entry)
    elseif redis.call('APPEND', key, entry) == #entry then
      ran_fresh = true
      redis.call('PEXPIREAT', key, ran_until(fid, period, reach))
    end
  end
  function ran_test(key, start, asks)
    local blob = redis.call('GET', key)
    if not blob then return function() return false end end
    if asks > FEW then
      local dues = {}
      for i = 1, #blob - 3, 4 do dues[start + unpack4('>I4', blob, i)] = true end
      return function(due) return dues[due] == true end
    end
    return function(due)
      local entry, from = pack4('>I4', due - start), 1
      while true do
        local at = find(blob, entry, from, true)
        if not at or at % 4 == 1 then return at ~= nil end
        from = at + 1  -- the bytes matched across two entries
      end
    end
  end
end
