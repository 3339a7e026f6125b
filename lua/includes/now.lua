-- now: ARGV[1] in ms when given (tests), else the Redis server clock; the one clock.
redis.replicate_commands()  -- TIME before writes needs effects replication on Redis < 7
local now = tonumber(ARGV[1]) or (function()
  local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end)()
