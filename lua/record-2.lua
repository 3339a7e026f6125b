-- record: add a line to a job's history and to the events list (dropped and dead fires).
-- KEYS[1] history  list: this job's runs, newest first
-- KEYS[2] events   list of JSON decisions, newest first, capped at 10000
-- ARGV[1] record JSON, ARGV[2] history cap
-- Returns 1.
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, 9999)
return 1
