-- backfill: queue again the fires of one owner (a job's schedule, or a runtime schedule's)
-- that did not run: each that is neither queued, in flight, dead nor in the record of runs.
-- KEYS[1] queue     zset fire -> due time, ms (the pool of the fires' job)
-- KEYS[2] working   zset fire -> lease deadline, ms (the same pool)
-- KEYS[3] dead      zset fire -> time it died, ms
-- KEYS[4] attempts  hash fire -> attempts used: a fire queued here gets 0, so the claim
--                   neither judges it by its starting deadline or catch_up, nor drops it
--                   for its bounds (it waits for a slot)
-- KEYS[5] events    list of JSON decisions, newest first, capped at 10000
-- KEYS[6] history   list: the runs of the fires' job on this shard, newest first
-- KEYS[6 + i]       the record strings of runs (lua/includes/ran.lua) of the periods the
--                   fires are due in; a key's name ends with its period's number
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] '1': queue the fires that did not run; '0': only say which they are
-- ARGV[3] history record JSON to add when a fire is queued ('' for none): who asked, and
--         the range
-- ARGV[4] history cap
-- ARGV[5] record period, ms
-- ARGV[6..] the fires, '<job>@<due_ms>' or '<job>@<due_ms>!<schedule id>'
-- Returns per fire: 'queued' (or 'to run', when only looking), 'queued already',
-- 'in flight', 'dead' or 'ran'.
-- @include now.lua
-- @include events.lua
-- @include fires.lua
-- @include ran.lua
local queue_them = ARGV[2] == '1'
local period = tonumber(ARGV[5])
local asks = {}  -- period number -> fires due in it
for i = 6, #ARGV do
  local p = math.floor(due_of(ARGV[i]) / period)
  asks[p] = (asks[p] or 0) + 1
end
local ran = {}  -- period number -> its record's test
for i = 7, #KEYS do
  local p = tonumber(string.match(KEYS[i], ':(%d+)$'))
  ran[p] = ran_test(KEYS[i], p * period, asks[p] or 0)
end
local out, queued, first = {}, 0, nil
for i = 6, #ARGV do
  local fid = ARGV[i]
  local due = due_of(fid)
  local state
  if redis.call('ZSCORE', KEYS[1], fid) then
    state = 'queued already'
  elseif redis.call('ZSCORE', KEYS[2], fid) then
    state = 'in flight'
  elseif redis.call('ZSCORE', KEYS[3], fid) then
    state = 'dead'
  elseif ran[math.floor(due / period)](due) then
    state = 'ran'
  elseif queue_them then
    redis.call('ZADD', KEYS[1], due_s_of(fid), fid)
    redis.call('HSET', KEYS[4], fid, 0)
    state = 'queued'
    queued = queued + 1
    first = first or fid
  else
    state = 'to run'
  end
  out[#out + 1] = state
end
if queued > 0 then
  if ARGV[3] ~= '' then
    redis.call('LPUSH', KEYS[6], ARGV[3])
    redis.call('LTRIM', KEYS[6], 0, tonumber(ARGV[4]) - 1)
  end
  push_event(KEYS[5], cjson.encode({event = 'backfill', fire = first, queued = queued,
    at = now}))
end
return out
