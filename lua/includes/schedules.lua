-- schedules: the stored line of a runtime schedule (Keys.schedules), as in
-- cronsvc/schedule/runtime.py:
--   rev|updated.created|actor|job|policy|when|payload  (times in base 36, created left
--   out while it equals updated; policy: 'p' paused, a catch_up letter a/l/n, an overlap
--   letter A/F/R/Q, deadline digits)
-- and the form before, still read:
--   rev|created_ms|updated_ms|actor|job|paused|catch_up|deadline_ms|overlap|when|payload
--   schedule_rev(line)      the rev (a string of digits)
--   schedule_content(line)  everything after actor: the definition
--   schedule_created(line)  when it was created, ms (a number)
--   schedule_policy(line)   job, paused ('1'/'0'), catch_up, deadline_ms, overlap, payload
--                           ('' where the job's own value applies, or there is no payload);
--                           nil for a line that is not a stored schedule
--   schedule_line(rev, now, created, actor, content)  the line to store (rev, now and
--                           created numbers; now is usually the same for a whole call)
--   is_schedule_id(sid)     sid is a schedule id (SCHEDULE_ID of runtime.py)
local schedule_rev, schedule_content, schedule_created, schedule_policy, schedule_line
local is_schedule_id
do
  local match, sub, format, find = string.match, string.sub, string.format, string.find
  local CATCH_UP = {a = 'all', l = 'latest', n = 'none'}
  local OVERLAP = {A = 'allow', F = 'forbid', R = 'replace', Q = 'queue'}
  local DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz'
  local function b36(n)
    local out = ''
    repeat
      local d = n % 36
      out = sub(DIGITS, d + 1, d + 1) .. out
      n = (n - d) / 36
    until n == 0
    return out
  end
  function is_schedule_id(sid) return #sid <= 200 and match(sid, '^[%w][%w_.:/%-]*$') ~= nil end
  function schedule_rev(line) return match(line, '^(%d+)|') end
  function schedule_content(line)
    return match(line, '^%d+|[%w]+%.[%w]*|[^|]*|(.*)$')
      or match(line, '^%d+|%d+|%d+|[^|]*|(.*)$')
  end
  function schedule_created(line)
    local updated, created = match(line, '^%d+|([%w]+)%.([%w]*)|')
    if updated then return tonumber(created ~= '' and created or updated, 36) end
    return tonumber(match(line, '^%d+|(%d+)|'))
  end
  function schedule_policy(line)
    -- The head by a pattern; the end of 'when' (JSON without '|') by a plain find: a class
    -- matched char by char over it cost more than the rest of the line.
    local job, policy, at = match(line, '^%d+|[%w]+%.[%w]*|[^|]*|([^|]*)|([%w]*)|()')
    local bar = job and find(line, '|', at, true)
    if bar and bar > at then
      local payload = sub(line, bar + 1)
      if policy == '' then return job, '0', '', '', '', payload end  -- most: the job's own
      local paused, c, o, deadline = match(policy, '^(p?)([aln]?)([AFRQ]?)(%d*)$')
      if not paused then return nil end
      return job, paused == 'p' and '1' or '0', CATCH_UP[c] or '', deadline, OVERLAP[o] or '',
        payload
    end
    return match(line, '^%d+|%d+|%d+|[^|]*|([^|]*)|([01])|([^|]*)|(%d*)|([^|]*)|{[^|]*}|(.*)$')
  end
  local last_now, last_now36
  function schedule_line(rev, now, created, actor, content)
    if now ~= last_now then last_now, last_now36 = now, b36(now) end
    return format('%d', rev) .. '|' .. last_now36 .. '.' ..
      (created == now and '' or b36(created)) .. '|' .. actor .. '|' .. content
  end
end
