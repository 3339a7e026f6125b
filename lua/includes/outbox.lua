-- outbox: the events people are told about, pushed by the script that records the outcome,
-- so an event exists exactly when its outcome does (cronsvc/outbox/entries.py, its twin,
-- reads them).
-- A job's policy line says which events it wants (`mask`, ',dead,missed,' style, '' for
-- none) and after how many fires failed in a row it is paused (`pause_after`, 0: never).
--   outbox_line(e)      one entry as JSON, its fields in OUTBOX_FIELDS' order
--   wants(mask, kind)   the job wants events of this kind
--   tracks(mask, pause_after)  failures of the job are counted (for recovered, auto-pause)
--   attempt_failed(failing, job)  an attempt failed: a failure episode is open
--   fire_failed(failing, paused, outbox, job, fid, pause_after, now)  a fire failed for
--                       good: count it, and pause the job (actor auto, event paused) at
--                       pause_after in a row
--   succeeded(failing, outbox, jobs, fids, attempts, now)  fires of these jobs succeeded:
--                       close their episodes, event recovered
--   chained(outbox, job, fid, record, next)  a fire of job ended as its history record
--                       says: event chain, for the notifier to queue the jobs of next
--                       ('a,b'), at the time the run ended
local OUTBOX_FIELDS = {'event', 'job', 'fire', 'attempt', 'at', 'status', 'reason',
  'exit_code', 'output', 'count', 'next'}
local outbox_line, wants, tracks, attempt_failed, fire_failed, succeeded, chained
do
  function outbox_line(e)
    local parts = {}
    for _, field in ipairs(OUTBOX_FIELDS) do
      local value = e[field]
      if value ~= nil and value ~= cjson.null then
        if type(value) == 'number' then
          value = string.format('%d', value)
        else
          value = cjson.encode(value)
        end
        parts[#parts + 1] = '"' .. field .. '":' .. value
      end
    end
    return '{' .. table.concat(parts, ',') .. '}'
  end
  function wants(mask, kind)
    return mask ~= '' and string.find(mask, ',' .. kind .. ',', 1, true) ~= nil
  end
  function tracks(mask, pause_after) return mask ~= '' or pause_after > 0 end
  function attempt_failed(failing, job) redis.call('HSETNX', failing, job, 0) end
  function fire_failed(failing, paused, outbox, job, fid, pause_after, now)
    local n = redis.call('HINCRBY', failing, job, 1)
    if pause_after > 0 and n >= pause_after and redis.call('HEXISTS', paused, job) == 0 then
      local note = 'auto: ' .. n .. ' fires failed in a row'
      redis.call('HSET', paused, job, '{"note":' .. cjson.encode(note) .. ',"since":'
        .. string.format('%d', now) .. ',"actor":"auto"}')
      redis.call('LPUSH', outbox, outbox_line({event = 'paused', job = job, fire = fid,
        at = now, reason = note, count = n}))
    end
  end
  function chained(outbox, job, fid, record, next)
    local ok, r = pcall(cjson.decode, record)
    if not ok or type(r) ~= 'table' then r = {} end
    local started, took = tonumber(r.started), tonumber(r.duration_ms)
    local output = type(r.output) == 'string' and string.sub(r.output, -2000) or nil
    redis.call('LPUSH', outbox, outbox_line({event = 'chain', job = job, fire = fid,
      attempt = tonumber(r.attempt), at = started and (started + (took or 0)) or nil,
      status = type(r.status) == 'string' and r.status or nil, output = output, next = next}))
  end
  function succeeded(failing, outbox, jobs, fids, attempts, now)
    if redis.call('HLEN', failing) == 0 then return end
    local streaks = redis.call('HMGET', failing, unpack(jobs))
    for i, job in ipairs(jobs) do
      if streaks[i] then
        redis.call('HDEL', failing, job)
        redis.call('LPUSH', outbox, outbox_line({event = 'recovered', job = job,
          fire = fids[i], attempt = attempts[i], at = now, status = 'ok',
          count = tonumber(streaks[i])}))
        streaks[i] = false
        for j = i + 1, #jobs do
          if jobs[j] == job then streaks[j] = false end
        end
      end
    end
  end
end
