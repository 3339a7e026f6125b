-- ran: the record of fires that ran (cronsvc/ran.py): per owner (the job, or '!' .. schedule
-- id) per period of 2^30 ms, one string of the due times' offsets in the period, 4 bytes
-- each, big-endian; kept until `reach` ms after its period ends.
--   record_ran(key, entry, fid, period, reach)  fid ran: append its entry (4 bytes, from
--                       cronsvc/ran.py; '' for a fire that is not recorded), or the entries
--                       of fires of one record from fid on, concatenated, to their record
--                       string `key`, whose expiry the first entries set
--   ran_expires(key, fid, period, reach)  set that expiry of record string `key` (fid, a
--                       fire of its period): for the caller whose append made the string
--   ran_test(key, start, asks)  a function: whether the record string `key`, of the period
--                       starting at `start` ms, holds a due time; `asks`, how many it will
--                       be asked about: a few are looked up in the string (a period of a
--                       minutely job is 70 KB, too much to decode per fire fed), many from
--                       a set of all of them built once
local record_ran, ran_expires, ran_test
do
  local match, find, pack4, unpack4 = string.match, string.find, struct.pack, struct.unpack
  local FEW = 16
  function ran_expires(key, fid, period, reach)
    local due = tonumber(match(fid, '@(%d+)'))
    redis.call('PEXPIREAT', key, string.format('%d', due - due % period + period + reach))
  end
  function record_ran(key, entry, fid, period, reach)
    if entry == '' then return end
    if redis.call('APPEND', key, entry) == #entry then ran_expires(key, fid, period, reach) end
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
