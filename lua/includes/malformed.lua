-- malformed: an entry read back that is not what its key holds (a queue member that is not a
-- fire id, say) is set aside: taken out where it was by the script that found it, and kept
-- in the shard's list of them (Keys.malformed; cronsvc/malformed.py reads it), one JSON line
-- each, newest first, the last MALFORMED_KEPT of them.
--   set_aside(list, key, member, why, now[, value])  keep one (value: a hash field's)
local MALFORMED_KEPT = 1000
local function set_aside(list, key, member, why, now, value)
  redis.call('LPUSH', list, '{"key":' .. cjson.encode(key) .. ',"member":' .. cjson.encode(member)
    .. ',"why":' .. cjson.encode(why) .. (value and ',"value":' .. cjson.encode(value) or '')
    .. ',"at":' .. string.format('%d', now) .. '}')
  redis.call('LTRIM', list, 0, MALFORMED_KEPT - 1)
end
