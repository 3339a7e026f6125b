-- ran: the record of fires that ran (cronsvc/ran.py): per owner (the job, or '!' .. schedule
-- id) per period of 2^30 ms, one string of the due times' offsets in the period, 4 bytes
-- each, big-endian; kept until `reach` ms after its period ends.
--   record_ran(key, fid, period, reach)  fid ran: append it to its record string `key`
--                       (one-offs and each-host copies are not recorded)
--   ran_dues(key, period)  the set (due ms -> true) a record string holds; its period is
--                       the number the key name ends with
local record_ran, ran_dues
do
  local find, match, pack, unpack4 = string.find, string.match, struct.pack, struct.unpack
  function record_ran(key, fid, period, reach)
    if find(fid, '#', 1, true) or find(fid, '!@', 1, true) then return end
    local due = tonumber(match(fid, '@(%d+)'))
    local start = due - due % period
    if redis.call('APPEND', key, pack('>I4', due - start)) == 4 then
      redis.call('PEXPIREAT', key, string.format('%d', start + period + reach))
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
