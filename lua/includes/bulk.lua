-- bulk: one command over a list of arguments of any length. unpack() is bounded by the Lua C
-- stack (8000 values), so a long list is sent in slices, each of whole tuples (a ZADD's
-- score stays with its member).
--   bulk(cmd, key, args, width[, option[, first, last]])  redis.call(cmd, key[, option],
--                       ...) over args[first..last] (default: all of args), `width`
--                       values a tuple; the sum of the replies (0 for no arguments, and no
--                       command sent)
local function bulk(cmd, key, args, width, option, first, last)
  first, last = first or 1, last or #args
  local step, total = 4000 - 4000 % width, 0
  for i = first, last, step do
    local stop = math.min(i + step - 1, last)
    if option then
      total = total + redis.call(cmd, key, option, unpack(args, i, stop))
    else
      total = total + redis.call(cmd, key, unpack(args, i, stop))
    end
  end
  return total
end
