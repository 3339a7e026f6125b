-- fires: a fire id is '<job>@<due_ms>' (the job's own schedule), '<job>@<due_ms>#<tag>'
-- (one-off) or '<job>@<due_ms>!<schedule id>' (a runtime schedule), as in cronsvc/fires.py;
-- job names and schedule ids never contain '@', '#', '!' or '|'.
--   job_of(fid)        the job, nil if fid is not a fire id
--   due_of(fid)        the due time, ms (a number); due_s_of(fid) its digits (a string)
--   split_fire(fid)    job, due digits, true if a one-off, the schedule id or nil: no
--                      pattern (claim's hot path)
--   owner_of(fid, job) whose fire it is for overlap: the job, or '!' .. schedule id
--   is_cron_fire(fid)  fid is '<job>@<due_ms>', no tag
--   fire_head(job)     what every fire id of job begins with; has_head(fid, head) tests it
local job_of, due_of, due_s_of, split_fire, is_cron_fire, fire_head, has_head, owner_of
do
  local find, sub, match = string.find, string.sub, string.match
  function job_of(fid) return match(fid, '^(.-)@%d') end
  function due_s_of(fid) return match(fid, '@(%d+)') end
  function due_of(fid) return tonumber(match(fid, '@(%d+)')) end
  function split_fire(fid)
    local at = find(fid, '@', 1, true)
    local tag = find(fid, '#', at, true)
    if tag then return sub(fid, 1, at - 1), sub(fid, at + 1, tag - 1), true, nil end
    local bang = find(fid, '!', at, true)
    if bang then return sub(fid, 1, at - 1), sub(fid, at + 1, bang - 1), false, sub(fid, bang + 1) end
    return sub(fid, 1, at - 1), sub(fid, at + 1), false, nil
  end
  function owner_of(fid, job)
    local bang = find(fid, '!', 1, true)
    return bang and sub(fid, bang) or job
  end
  function is_cron_fire(fid) return match(fid, '^[^@]*@%d+$') ~= nil end
  function fire_head(job) return job .. '@' end
  function has_head(fid, head) return sub(fid, 1, #head) == head end
end
