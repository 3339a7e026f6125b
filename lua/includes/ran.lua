-- ran: the record of fires that ran (cronsvc/ran.py): per owner (the job, or '!' .. schedule
-- id) per period of 2^30 ms, one string of the due times' offsets in the period, 4 bytes
-- each, big-endian; kept until `reach` ms after its period ends.
--   record_ran(key, entry, fid, period, reach)  fid ran: append its entry (4 bytes, from
--                       cronsvc/ran.py; '' for a fire that is not recorded) to its record
--                       string `key`, whose expiry the first entry sets
--   ran_dues(key, period)  the set (due ms -> true) a record string holds; its period is
--                       the number the key name ends with
local record_ran, ran_dues
do
  local match, unpack4 = string.match, struct.unpack
  function record_ran(key, entry, fid, period, reach)
    if entry == '' then return end
    if redis.call('APPEND', key, entry) == 4 then
      local due = tonumber(match(fid, '@(%d+)'))
      redis.call('PEXPIREAT', key, string.format('%d', due - due % period + period + reach))
    end
  end
  function ran_dues(key, period)
    local dues = {}
    local blob = redis.call('GET', key)
    if not blob then return dues end
    local start = tonumber(match(key, ':(%d+)$')) * period
    for i = 1, #blob - 3, 4 do dues[start + unpack4('>I4', blob, i)] = true end
    return dues
  end
end
