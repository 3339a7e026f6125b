-- resume: end a runtime pause; optionally queue again fires the pause kept from running.
-- KEYS[1] paused   hash job -> JSON {note, since} of a runtime pause
-- KEYS[2] queue    zset fire -> due time, ms
-- KEYS[3] working  zset fire -> lease deadline, ms
-- KEYS[4] dead     zset fire -> time it died, ms
-- KEYS[5] events   list of JSON decisions, newest first, capped at 10000
-- KEYS[6] failing  hash job -> fires failed in a row: a resume starts the count again, so
--                  a job paused after failures gets its full number of fires again
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] job
-- ARGV[3] the pause JSON the fires below were computed from, or '' when there are none
-- ARGV[4..] cron fires of the job (`job@due_ms`) to queue again, score = their due time
-- Returns one flat array: status, then the fires queued again. Status 1: resumed; 0: the
--   job was not paused (nothing queued); -1: the pause is not the one given in ARGV[3]
--   (paused again or resumed meanwhile: nothing changed, compute again).
-- A fire already queued, in flight or dead is left alone. Fires due after the pause began
-- were never claimed before it (claim takes due fires only), so none of them has run.
-- @include now.lua
-- @include events.lua
-- @include fires.lua
local job = ARGV[2]
local current = redis.call('HGET', KEYS[1], job)
if not current then return {0} end
if ARGV[3] ~= '' and current ~= ARGV[3] then return {-1} end
local head = fire_head(job)
for i = 4, #ARGV do
  local fid = ARGV[i]
  if not has_head(fid, head) or not is_cron_fire(fid) then
    return redis.error_reply('NOT_A_CRON_FIRE ' .. fid .. ' of ' .. job)
  end
end
redis.call('HDEL', KEYS[1], job)
if redis.call('HGET', KEYS[6], job) then redis.call('HSET', KEYS[6], job, 0) end
local out = {1}
for i = 4, #ARGV do
  local fid = ARGV[i]
  if not redis.call('ZSCORE', KEYS[2], fid) and not redis.call('ZSCORE', KEYS[3], fid)
      and not redis.call('ZSCORE', KEYS[4], fid) then
    redis.call('ZADD', KEYS[2], due_s_of(fid), fid)
    out[#out + 1] = fid
  end
end
push_event(KEYS[5], cjson.encode({event = 'resumed', job = job, at = now,
  requeued = #out - 1}))
return out
