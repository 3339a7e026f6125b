-- notify-lease: take, keep or give up the lease of the one notifier that sends.
-- KEYS[1] lease   string: the id of the notifier that holds it, expiring unless renewed
-- ARGV[1] notifier id
-- ARGV[2] lease_ms: hold it this long from now; 0 gives it up (if held by ARGV[1])
-- Returns 1 if ARGV[1] holds the lease after the call, else 0.
local holder = redis.call('GET', KEYS[1])
if tonumber(ARGV[2]) == 0 then
  if holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 0
end
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
