-- schedule-aside: set aside a runtime schedule whose stored line the planner cannot read
-- (its schedule is not JSON, its cron or zone is not one): out of the schedules and marks,
-- kept in the list of entries set aside with its line; unless it changed meanwhile.
-- KEYS[1] schedules       hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks  zset schedule id -> planned up to, ms
-- KEYS[3] malformed       list of entries set aside (cronsvc/malformed.py)
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] schedule id
-- ARGV[3] the rev the planner read
-- ARGV[4] why
-- Returns 1 if it was set aside, 0 if it changed or went meanwhile.
-- @include now.lua
-- @include schedules.lua
-- @include malformed.lua
local sid = ARGV[2]
local line = redis.call('HGET', KEYS[1], sid)
if not line or schedule_rev(line) ~= ARGV[3] then return 0 end
redis.call('HDEL', KEYS[1], sid)
redis.call('ZREM', KEYS[2], sid)
set_aside(KEYS[3], KEYS[1], sid, ARGV[4], now, line)
return 1
