-- record: add a line to a job's history and to the events list (dropped and dead fires).
-- KEYS[1] history  list: this job's runs, newest first
-- KEYS[2] events   list of JSON decisions, newest first, capped at 10000
-- ARGV[1] history record JSON
-- ARGV[2] history cap
-- history record: see cronsvc/history.py; one JSON object with the fields, in this order,
--   fire, job, status, reason, scheduled, started, duration_ms, attempt, worker, exit_code,
--   output (null where there is no value); written as the worker sends it.
-- Returns 1.
-- @include events.lua
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
push_event(KEYS[2], ARGV[1])
return 1
