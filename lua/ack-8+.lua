-- ack: finish fires held with these tokens and record each run in its job's history.
-- Any number of fires in one call: the cost per fire is one ZREM, one LPUSH and one APPEND,
-- or a SET for a record of runs it makes (and an HSET and a PEXPIRE for a run that printed
-- something).
-- KEYS[1] working   zset fire -> lease deadline, ms
-- KEYS[2] attempts  hash fire -> fencing token of the current claim
-- KEYS[3] claims    hash fire -> claim
-- KEYS[4] running   hash job (or '!' .. schedule id) -> fire in flight
-- KEYS[5] cancels   hash fire -> reason the holder must stop
-- KEYS[6] payloads  hash fire -> payload JSON
-- KEYS[7] outbox    list of events to tell people about, newest first
-- KEYS[8] failing   hash job -> fires failed in a row: a success closes the episode and
--                   pushes the event recovered
-- KEYS[8 + i]       two keys per fire, then one per extra (below); of the f-th fire,
--                   KEYS[7 + 2f] is the list of its job's history, newest first, and
--                   KEYS[8 + 2f] the string of the record of runs it goes to
--                   (lua/includes/ran.lua), or any key of the shard for a fire that is not
--                   recorded (a one-off); of the e-th extra, KEYS[8 + 2n + e] is the hash
--                   of its fire's outputs (lua/includes/output.lua), or any key of the
--                   shard when it kept none
-- ARGV[1]   history cap
-- ARGV[2]   record period, ms
-- ARGV[3]   how long a record outlives its period, ms
-- ARGV[4]   how long a fire's outputs are kept, ms
-- ARGV[5]   n, the number of fires
-- ARGV[6..] per fire (the f-th at ARGV[4f + 2 .. 4f + 5]): fire, token, record JSON, its
--         entry in the record of runs ('': not recorded); then the extras, of the fires
--         whose success triggers jobs or that kept output (most fires have neither, and
--         carry nothing for it), four values each: the fire's number f, the jobs its
--         success triggers ('a,b', or '': none; event chain in KEYS[7]), the output it
--         kept ('': none; the record holds an excerpt of it), the run's start (ms: the
--         output's field; '' with no output). A fire's job is the one its id names.
-- history record: see cronsvc/history.py; one JSON object with the fields, in this order,
--   fire, job, status, reason, scheduled, started, duration_ms, attempt, worker, exit_code,
--   output (null where there is no value); written as the worker sends it.
-- Returns the fires not acked, two values each (none: an empty array): the fire's number f
-- (from 1) and 'LEASE_LOST <fire> token <token> current <current>': the token is not the
-- current one or the fire is not in working (a newer claim of the fire must not be
-- finished by an older holder).
-- @include fires.lua
-- @include outbox.lua
-- @include ran.lua
-- @include output.lua
local cap, period, reach = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local retention, n = ARGV[4], tonumber(ARGV[5])  -- (retention: digits, given to PEXPIRE)
local argv, keys = ARGV, KEYS
local working = keys[1]
local fids = {}
for i = 1, n do fids[i] = argv[4 * i + 2] end
-- The extras: per fire number, where its values start in ARGV, and its outputs' key.
local extra, extra_key = {}, {}
for x = 4 * n + 6, #argv, 4 do
  local f = tonumber(argv[x])
  extra[f], extra_key[f] = x, keys[8 + 2 * n + (x - 4 * n - 2) / 4]
end
local call = redis.call
-- The history's last index kept, as digits: a number given to redis.call is formatted with
-- printf at each call, and once a job's history is full each fire trims it.
local last_s = string.format('%d', cap - 1)
local current = call('HMGET', keys[2], unpack(fids))
-- done: the fires held with their token and still in working, taken out of it and
-- recorded in one pass; while every fire so far is done, it is fids itself. lost: the
-- reply, the number and reason of each fire not done (lost_at[i] true for each). (Asking
-- working about them all at once costs more: ZMSCORE formats each score with printf, and
-- while working is small Redis keeps it a list scanned on every lookup.)
local done, m, lost, lost_at = fids, 0, {}, nil
-- Consecutive fires of one job (the same history key, run_key) go in one LPUSH, their
-- records (run) in their order: the list ends as with an LPUSH each, newest first. Among
-- them, consecutive fires of one record of runs (ran_key) go in one APPEND of their entries
-- (ran_run; ran_first, the first one's fire). Each is written once the next fire has
-- another key, and after the last fire.
local run, run_n, run_key, ran_run, ran_n, ran_key, ran_first = {}, 0, nil, {}, 0, nil, nil
local function push_ran()
  if ran_n == 0 then return end
  record_ran(ran_key, ran_n == 1 and ran_run[1] or table.concat(ran_run, '', 1, ran_n),
    ran_first, period, reach)
  ran_n = 0
end
local function push_runs()
  push_ran()
  if call('LPUSH', run_key, unpack(run, 1, run_n)) > cap then
    call('LTRIM', run_key, '0', last_s)
  end
  run_n = 0
end
for i = 1, n do
  local held, a, fid = current[i], 4 * i + 1, fids[i]
  local token = argv[a + 2]
  -- Tokens are written as decimal digits: equal strings are the common case, no tonumber.
  if (held == token or tonumber(held) == tonumber(token))
      and call('ZREM', working, fid) == 1 then
    m = m + 1
    done[m] = fid
    local k = 2 * i + 6  -- the fire's KEYS before its first
    local record, entry, history = argv[a + 3], argv[a + 4], keys[k + 1]
    if run_n == 0 and keys[k + 3] ~= history then  -- the common case: one job, one fire
      if call('LPUSH', history, record) > cap then call('LTRIM', history, '0', last_s) end
      if entry == '' then  -- (record_ran, its common case inline)
      elseif ran_fresh then
        record_ran(keys[k + 2], entry, fid, period, reach)
      elseif call('APPEND', keys[k + 2], entry) == 4 then
        ran_fresh = true
        call('PEXPIREAT', keys[k + 2], ran_until(fid, period, reach))
      end
    else
      run_n = run_n + 1
      run[run_n], run_key = record, history
      if entry ~= '' then
        if ran_n > 0 and keys[k + 2] ~= ran_key then push_ran() end
        ran_n = ran_n + 1
        ran_run[ran_n] = entry
        if ran_n == 1 then ran_key, ran_first = keys[k + 2], fid end
      end
      if keys[k + 3] ~= history then push_runs() end
    end
    local x = extra[i]
    if x then
      local chain, output = argv[x + 1], argv[x + 2]
      if output ~= '' then keep_output(extra_key[i], argv[x + 3], output, retention) end
      if chain ~= '' then chained(keys[7], job_of(fid), fid, record, chain) end
    end
  else
    if done == fids then done = {unpack(fids, 1, m)} end
    lost_at = lost_at or {}
    lost_at[i] = true
    lost[#lost + 1] = i
    lost[#lost + 1] = 'LEASE_LOST ' .. fid .. ' token ' .. token .. ' current '
      .. tostring(held or 'none')
    if run_n > 0 and keys[2 * i + 9] ~= run_key then push_runs() end
  end
end
-- (The key after the last fire's is an extra's, maybe a history.)
if run_n > 0 then push_runs() end
if m > 0 then
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
    for i, fid in ipairs(done) do owners[i] = owner_of(fid, job_of(fid)) end
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
    for i = 1, n do
      if not (lost_at and lost_at[i]) then
        names[#names + 1] = job_of(fids[i])
        tokens[#tokens + 1] = tonumber(argv[4 * i + 3])
      end
    end
    succeeded(keys[8], keys[7], names, done, tokens, nil)
  end
end
return lost
