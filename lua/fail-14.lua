-- fail: record a failed attempt; requeue it for a retry while attempts remain, else dead-letter.
-- The payload stays in its hash: a retry, or a dead fire retried by hand, needs it.
-- KEYS[1]  working   zset fire -> lease deadline, ms
-- KEYS[2]  queue     zset fire -> due (or retry) time, ms
-- KEYS[3]  attempts  hash fire -> fencing token = attempts used
-- KEYS[4]  claims    hash fire -> claim
-- KEYS[5]  running   hash job (or '!' .. schedule id) -> fire in flight
-- KEYS[6]  cancels   hash fire -> reason the holder must stop
-- KEYS[7]  dead      zset fire -> time it died, ms
-- KEYS[8]  history   list: this job's runs, newest first
-- KEYS[9]  events    list of JSON decisions, newest first, capped at 10000
-- KEYS[10] outbox    list of events to tell people about, newest first
-- KEYS[11] failing   hash job -> fires failed in a row (for recovered and auto-pause)
-- KEYS[12] paused    hash job -> JSON of a runtime pause (auto-pause writes one)
-- KEYS[13] ran       string: the record of runs a fire that dies goes to
--                    (lua/includes/ran.lua), or any key of the shard for a one-off
-- KEYS[14] output    hash: the outputs of this fire's runs (lua/includes/output.lua)
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] fire
-- ARGV[3] token
-- ARGV[4] job
-- ARGV[5] history record JSON of the failed attempt
-- ARGV[6] history cap
-- ARGV[7] max_attempts
-- ARGV[8] retry_at_ms
-- ARGV[9] the events the job wants told, ',failed,dead,' style ('' for none)
-- ARGV[10] pause the job after this many fires failed in a row (0: never)
-- ARGV[11] the jobs its failure for good triggers ('a,b', or '': none; event chain)
-- ARGV[12] record period, ms
-- ARGV[13] how long a record outlives its period, ms
-- ARGV[14] the fire's entry in the record of runs ('': not recorded), kept if it dies
-- ARGV[15] the output the attempt kept ('': none); the record holds an excerpt of it
-- ARGV[16] how long the fire's outputs are kept, ms
-- history record: see cronsvc/history.py; one JSON object with the fields, in this order,
--   fire, job, status, reason, scheduled, started, duration_ms, attempt, worker, exit_code,
--   output (null where there is no value). ARGV[5] is written as the worker sends it; out
--   of attempts, a 'dead' line follows it: reason 'no attempts left[: <reason or status of
--   ARGV[5]>]', scheduled the fire's due time, attempt the token, worker ARGV[5]'s (null if
--   it has none), started, duration_ms, exit_code and output null.
-- Returns {'retry', retry_at_ms} or {'dead', now_ms}; error LEASE_LOST as ack.
-- @include now.lua
-- @include events.lua
-- @include fires.lua
-- @include history.lua
-- @include outbox.lua
-- @include ran.lua
-- @include output.lua
local fid, token, job = ARGV[2], ARGV[3], ARGV[4]
local current = redis.call('HGET', KEYS[3], fid)
if tonumber(current) ~= tonumber(token) or not redis.call('ZSCORE', KEYS[1], fid) then
  return redis.error_reply('LEASE_LOST ' .. fid .. ' token ' .. token ..
    ' current ' .. tostring(current or 'none'))
end
local cap = tonumber(ARGV[6])
redis.call('ZREM', KEYS[1], fid)
redis.call('HDEL', KEYS[4], fid)
redis.call('HDEL', KEYS[6], fid)
local owner = owner_of(fid, job)
if redis.call('HGET', KEYS[5], owner) == fid then redis.call('HDEL', KEYS[5], owner) end
redis.call('LPUSH', KEYS[8], ARGV[5])
local mask, pause_after = ARGV[9], tonumber(ARGV[10])
local ok, last = pcall(cjson.decode, ARGV[5])
if not ok or type(last) ~= 'table' then last = {} end
if type(last.started) == 'number' then
  keep_output(KEYS[14], string.format('%d', last.started), ARGV[15], tonumber(ARGV[16]))
end
local function tell(kind)
  if wants(mask, kind) then
    redis.call('LPUSH', KEYS[10], outbox_line({event = kind, job = job, fire = fid,
      attempt = tonumber(token), at = now, status = last.status, reason = last.reason,
      exit_code = last.exit_code, output = last.output}))
  end
end
local verdict, at
if tonumber(token) < tonumber(ARGV[7]) then
  verdict, at = 'retry', tonumber(ARGV[8])
  redis.call('ZADD', KEYS[2], at, fid)
  push_event(KEYS[9],
    cjson.encode({event = 'retry', fire = fid, attempt = tonumber(token), at = now, retry_at = at}))
  if tracks(mask, pause_after) then attempt_failed(KEYS[11], job) end
  tell('failed')
else
  -- Attempts and payload stay, so the dead fire can be retried by hand.
  verdict, at = 'dead', now
  redis.call('ZADD', KEYS[7], now, fid)
  record_ran(KEYS[13], ARGV[14], fid, tonumber(ARGV[12]), tonumber(ARGV[13]))
  -- The reason names the last attempt's error: what `cronsvc dead` shows.
  local why = last.reason or last.status
  redis.call('LPUSH', KEYS[8], history_line({
    fire = fid, job = job, status = 'dead',
    reason = 'no attempts left' .. (type(why) == 'string' and (': ' .. why) or ''),
    scheduled = due_of(fid) or cjson.null, started = cjson.null, duration_ms = cjson.null,
    attempt = tonumber(token),
    worker = type(last.worker) == 'string' and last.worker or cjson.null,
    exit_code = cjson.null, output = cjson.null}))
  push_event(KEYS[9],
    cjson.encode({event = 'dead', fire = fid, attempt = tonumber(token), at = now}))
  tell('dead')
  if ARGV[11] ~= '' then chained(KEYS[10], job, fid, ARGV[5], ARGV[11]) end
  if tracks(mask, pause_after) then
    fire_failed(KEYS[11], KEYS[12], KEYS[10], job, fid, pause_after, now)
  end
end
redis.call('LTRIM', KEYS[8], 0, cap - 1)
return {verdict, at}
