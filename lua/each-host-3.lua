-- each-host: give this host its own run of every due fire of the jobs with pool each-host.
-- The planner queues each such fire once, in the each-host pool's queue; each host copies
-- it into its own queue as '<fire>!@<host>' (once: the marks say which hosts have), where
-- the claim script runs it like any fire. A fire stays there for the window, so a host that
-- joins meanwhile gets it too; after the window it goes, and no host is waited for.
-- KEYS[1] queue    zset fire -> due time, ms: the each-host pool's fires
-- KEYS[2] marks    hash fire -> '|host|host|' the hosts that copied it
-- KEYS[3] mine     zset fire -> due time, ms: the queue of this host's pool ('@' .. host)
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] host
-- ARGV[3] window_ms
-- ARGV[4] fires looked at, at most
-- Returns {copied, the due time of the next fire not due yet (ms), or -1}.
-- @include now.lua
local host, window = ARGV[2], tonumber(ARGV[3])
local tag = '|' .. host .. '|'
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[4]))
local copied = 0
for i = 1, #due, 2 do
  local fid, at = due[i], tonumber(due[i + 1])
  if now - at > window then
    redis.call('ZREM', KEYS[1], fid)
    redis.call('HDEL', KEYS[2], fid)
  else
    local marks = redis.call('HGET', KEYS[2], fid) or '|'
    if not string.find(marks, tag, 1, true) then
      redis.call('HSET', KEYS[2], fid, marks .. host .. '|')
      redis.call('ZADD', KEYS[3], at, fid .. '!@' .. host)
      copied = copied + 1
    end
  end
end
local later = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {copied, later[2] and tonumber(later[2]) or -1}
