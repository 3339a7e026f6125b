-- fires: a fire id is '<job>@<due_ms>' (the job's own schedule), '<job>@<due_ms>#<tag>'
-- (one-off), '<job>@<due_ms>!<schedule id>' (a runtime schedule) or '<job>@<due_ms>!@<host>'
-- (one host's run of an each-host fire), as in cronsvc/fires.py; job names and schedule
-- ids never contain '@', '#', '!' or '|'.
--   job_of(fid)        the job, nil if fid is not a fire id
--   due_of(fid)        the due time, ms (a number); due_s_of(fid) its digits (a string)
--   split_fire(fid)    job, due digits, true if a one-off, the schedule id or nil (nil for
--                      a host's run too): no pattern (claim's hot path)
--   owner_of(fid, job) whose fire it is for overlap: the job, '!' .. schedule id, or for
--                      a host's run the job on that host, job .. '!@' .. host
--   fire_id(job, due[, sid])  the id of job's fire due at `due` (its digits), of the runtime
--                      schedule sid when given (fire_id of cronsvc/fires.py)
--   is_cron_fire(fid)  fid is '<job>@<due_ms>', no tag
--   fire_head(job)     what every fire id of job begins with; has_head(fid, head) tests it
--   well_formed(fid)   fid is a fire id: a job name, '@', at most 15 digits, then nothing,
--                      '#' and a tag, or '!' and a schedule id; then '!@' and a host for
--                      one host's run (the grammar of FIRE_ID in cronsvc/fires.py); the
--                      others are not split
--   cron_parts(fid)    the job and due time (digits) of a well formed '<job>@<due_ms>', else
--                      nil: one match, no table (claim's hot path)
--   fire_split(fid)    the job and due time (digits) of a fire id, then for one that is not
--                      '<job>@<due_ms>' its fire_parts table, of a runtime schedule's fire
--                      with its job, sid and owner only (the due time is returned, fid is
--                      known, oneoff nil); nil if fid is not a fire id. A cron fire and a
--                      runtime schedule's take one match (claim's hot path: a claim splits
--                      every fire it scans, a table the fewer fields the cheaper)
--   fire_owner(fid)    the due time (digits) and owner of a cron fire or a runtime schedule's
--                      one, as fire_parts gives them, in one match; nil for any other. A
--                      schedule id is not checked: an id a fire id cannot hold makes an
--                      owner no fire id has (a claim's look at the rest of its scan)
--   fire_parts(fid[, not_cron])  fid split once for all a claim asks of it, or false if it
--                      is not a fire id (not_cron: cron_parts said it is no '<job>@<due_ms>'):
--                      a table of fid, job, due_s (digits), oneoff (nil or
--                      false: not a one-off), sid (nil for none) and owner (the due
--                      time as a number is tonumber(due_s), made where a rare judgement
--                      needs it: it costs a strtod)
local job_of, due_of, due_s_of, split_fire, is_cron_fire, fire_head, has_head, owner_of
local well_formed, fire_id, fire_parts, cron_parts, fire_split, fire_owner
do
  local find, sub, match, byte = string.find, string.sub, string.match, string.byte
  function job_of(fid) return match(fid, '^(.-)@%d') end
  function due_s_of(fid) return match(fid, '@(%d+)') end
  function due_of(fid) return tonumber(match(fid, '@(%d+)')) end
  function split_fire(fid)
    local at = find(fid, '@', 1, true)
    local tag = find(fid, '#', at, true)
    if tag then return sub(fid, 1, at - 1), sub(fid, at + 1, tag - 1), true, nil end
    local bang = find(fid, '!', at, true)
    if bang then
      local sid = sub(fid, bang + 1)
      if sub(sid, 1, 1) == '@' then sid = nil end  -- a host's run of an each-host fire
      return sub(fid, 1, at - 1), sub(fid, at + 1, bang - 1), false, sid
    end
    return sub(fid, 1, at - 1), sub(fid, at + 1), false, nil
  end
  function owner_of(fid, job)
    local bang = find(fid, '!', 1, true)
    if not bang then return job end
    -- a host's run: the job on that host ('<job>!@<host>'); a schedule's: '!' .. its id
    return sub(fid, bang + 1, bang + 1) == '@' and job .. sub(fid, bang) or sub(fid, bang)
  end
  function fire_id(job, due, sid)
    if sid then return job .. '@' .. due .. '!' .. sid end
    return job .. '@' .. due
  end
  function is_cron_fire(fid) return match(fid, '^[^@]*@%d+$') ~= nil end
  function fire_head(job) return job .. '@' end
  function has_head(fid, head) return sub(fid, 1, #head) == head end
  function well_formed(fid)
    local due, rest = match(fid, '^[%w][%w_.%-]*@(%d+)(.*)$')
    if not due or #due > 15 then return false end
    local host = find(rest, '!@', 1, true)
    if host then
      if not match(sub(rest, host + 2), '^[%w_.%-]+$') then return false end
      rest = sub(rest, 1, host - 1)
    end
    return rest == '' or match(rest, '^#[%w_.%-]+$') ~= nil
      or match(rest, '^![%w][%w_.:/%-]*$') ~= nil
  end
  function cron_parts(fid)
    local job, due_s = match(fid, '^([%w][%w_.%-]*)@(%d+)$')
    if job and #due_s <= 15 then return job, due_s end
    return nil
  end
  function fire_parts(fid, not_cron)
    -- Most fires are '<job>@<due_ms>': one match says so and splits them.
    local job, due_s
    if not not_cron then job, due_s = cron_parts(fid) end
    if job then
      return {fid = fid, job = job, due_s = due_s, owner = job}  -- oneoff: nil, false
    end
    if not well_formed(fid) then return false end
    local oneoff, sid
    job, due_s, oneoff, sid = split_fire(fid)
    return {fid = fid, job = job, due_s = due_s, oneoff = oneoff, sid = sid,
      owner = owner_of(fid, job)}
  end
  function fire_split(fid)
    -- A pattern that fails backtracks over the whole id: this one stops after the due time,
    -- and what follows it says the form.
    local job, due_s, at = match(fid, '^([%w][%w_.%-]*)@(%d+)()')
    if job and #due_s <= 15 then
      if at > #fid then return job, due_s end
      -- '!' and a schedule id (no '@': not a host's run), as well_formed takes it.
      local sid = byte(fid, at) == 33 and sub(fid, at + 1)
      if sid and match(sid, '^[%w][%w_.:/%-]*$') then
        return job, due_s,
          {job = job, sid = sid, owner = '!' .. sid}
      end
    end
    local f = fire_parts(fid, true)  -- the rest: one-offs, hosts' runs, not fire ids
    if f then return f.job, f.due_s, f end
    return nil
  end
  function fire_owner(fid)
    local job, due_s, at = match(fid, '^([%w][%w_.%-]*)@(%d+)()')
    if not job or #due_s > 15 then return nil end
    if at > #fid then return due_s, job end
    -- '!' and not '!@' (a host's run): '!' .. schedule id
    if byte(fid, at) == 33 and byte(fid, at + 1) ~= 64 then return due_s, sub(fid, at) end
    return nil
  end
end
