-- wake: when a worker should claim again: at the first fire due in the queue, or the first
-- lease to lapse in the working set, whichever is sooner; -1 if neither has any. A score
-- below 0 (a member written by hand at -inf, say) is due now, not "nothing", and one of
-- +inf is a time a reply can carry.
--   next_due(queue, working, past)  that time, ms; past (a string of digits, or false):
--                      the queue's fires due by then are left out (this worker looked at
--                      them and left them for others)
local next_due
do
  -- (The ranks are strings: a number given to redis.call is formatted with sprintf.)
  local function clamped(score) return math.min(math.max(tonumber(score), 0), 2^53) end
  function next_due(queue, working, past)
    local next_ms = -1
    local q
    if past then
      q = redis.call('ZRANGEBYSCORE', queue, '(' .. past, '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    else
      q = redis.call('ZRANGE', queue, '0', '0', 'WITHSCORES')
    end
    if q[2] then next_ms = clamped(q[2]) end
    local w = redis.call('ZRANGE', working, '0', '0', 'WITHSCORES')
    if w[2] and (next_ms < 0 or clamped(w[2]) < next_ms) then next_ms = clamped(w[2]) end
    return next_ms
  end
end
