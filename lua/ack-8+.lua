-- ack: finish fires held with these tokens and record each run in its job's history.
-- Any number of fires in one call: the cost per fire is one ZREM, one LPUSH and one APPEND
-- (and an HSET and a PEXPIRE for a run that printed something).
-- KEYS[1] working   zset fire -> lease deadline, ms
-- KEYS[2] attempts  hash fire -> fencing token of the current claim
-- KEYS[3] claims    hash fire -> claim
-- KEYS[4] running   hash job (or '!' .. schedule id) -> fire in flight
-- KEYS[5] cancels   hash fire -> reason the holder must stop
-- KEYS[6] payloads  hash fire -> payload JSON
-- KEYS[7] outbox    list of events to tell people about, newest first
-- KEYS[8] failing   hash job -> fires failed in a row: a success closes the episode and
--                   pushes the event recovered
-- KEYS[8 + i]       three keys per fire; of the f-th fire, KEYS[6 + 3f] is the list of its
--                   job's history, newest first, KEYS[7 + 3f] the string of the record
--                   of runs it goes to (lua/includes/ran.lua), or any key of the shard for
--                   a fire that is not recorded (a one-off), and KEYS[8 + 3f] the hash of
--                   its outputs (lua/includes/output.lua), or any key of the shard for a
--                   run that kept none
-- ARGV[1]   history cap
-- ARGV[2]   record period, ms
-- ARGV[3]   how long a record outlives its period, ms
-- ARGV[4]   how long a fire's outputs are kept, ms
-- ARGV[5..] per fire (the f-th at ARGV[8f - 3 .. 8f + 4]): fire, token, job, record JSON,
--         the jobs its success triggers ('a,b', or '': none; event chain in KEYS[7]), its
--         entry in the record of runs ('': not recorded), the output it kept ('': none;
--         the record holds an excerpt of it), the run's start (ms: the output's field;
--         '' with no output)
-- history record: see cronsvc/history.py; one JSON object with the fields, in this order,
--   fire, job, status, reason, scheduled, started, duration_ms, attempt, worker, exit_code,
--   output (null where there is no value); written as the worker sends it.
-- Returns per fire 1 if acked, else 'LEASE_LOST <fire> token <token> current <current>':
-- the token is not the current one or the fire is not in working (a newer claim of the
-- fire must not be finished by an older holder).
-- @include fires.lua
-- @include outbox.lua
-- @include ran.lua
-- @include output.lua
local cap, period, reach = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local retention = tonumber(ARGV[4])
local argv, keys = ARGV, KEYS
local n = (#argv - 4) / 8
local fids = {}
for i = 1, n do fids[i] = argv[8 * i - 3] end
local current = redis.call('HMGET', keys[2], unpack(fids))
local out, done, at = {}, {}, {}
for i = 1, n do
  local a, k = 8 * i - 4, 3 * i + 5  -- the fire's ARGV and KEYS before its first
  local fid, token, held = argv[a + 1], argv[a + 2], current[i]
  -- Tokens are written as decimal digits: equal strings are the common case, no tonumber.
  if (held == token or tonumber(held) == tonumber(token))
      and redis.call('ZREM', keys[1], fid) == 1 then
    local record, chain, output = argv[a + 4], argv[a + 5], argv[a + 7]
    done[#done + 1] = fid
    at[#at + 1] = a
    if redis.call('LPUSH', keys[k + 1], record) > cap then
      redis.call('LTRIM', keys[k + 1], 0, cap - 1)
    end
    record_ran(keys[k + 2], argv[a + 6], fid, period, reach)
    if output ~= '' then keep_output(keys[k + 3], argv[a + 8], output, retention) end
    if chain ~= '' then chained(keys[7], argv[a + 3], fid, record, chain) end
    out[i] = 1
  else
    out[i] = 'LEASE_LOST ' .. fid .. ' token ' .. token .. ' current ' .. tostring(held or 'none')
  end
end
if #done > 0 then
  redis.call('HDEL', keys[2], unpack(done))
  redis.call('HDEL', keys[3], unpack(done))
  -- Most fires were never cancelled nor given a payload: those hashes are then empty.
  for _, key in ipairs({keys[5], keys[6]}) do
    if redis.call('HLEN', key) > 0 then redis.call('HDEL', key, unpack(done)) end
  end
  -- The job's fire in flight (overlap forbid/replace) is cleared only if it is this one;
  -- the hash is empty while every job running allows overlap.
  if redis.call('HLEN', keys[4]) > 0 then
    local owners = {}
    for i, a in ipairs(at) do owners[i] = owner_of(done[i], argv[a + 3]) end
    local in_flight = redis.call('HMGET', keys[4], unpack(owners))
    local clear = {}
    for i, owner in ipairs(owners) do
      if in_flight[i] == done[i] then clear[#clear + 1] = owner end
    end
    if #clear > 0 then redis.call('HDEL', keys[4], unpack(clear)) end
  end
  -- Failures are counted per job whose policy wants it: a success ends its streak.
  if redis.call('HLEN', keys[8]) > 0 then
    local names, tokens = {}, {}
    for i, a in ipairs(at) do
      names[i] = argv[a + 3]
      tokens[i] = tonumber(argv[a + 2])
    end
    succeeded(keys[8], keys[7], names, done, tokens, nil)
  end
end
return out
