-- fires: a fire id is '<job>@<due_ms>' (cron) or '<job>@<due_ms>#<tag>' (one-off), as in
-- cronsvc/fires.py; job names never contain '@', '#' or '|'.
--   job_of(fid)        the job, nil if fid is not a fire id
--   due_of(fid)        the due time, ms (a number); due_s_of(fid) its digits (a string)
--   split_fire(fid)    job, due digits, true if a one-off: no pattern (claim's hot path)
--   is_cron_fire(fid)  fid is '<job>@<due_ms>', no tag
--   fire_head(job)     what every fire id of job begins with; has_head(fid, head) tests it
local job_of, due_of, due_s_of, split_fire, is_cron_fire, fire_head, has_head
do
  local find, sub, match = string.find, string.sub, string.match
  function job_of(fid) return match(fid, '^(.-)@%d') end
  function due_s_of(fid) return match(fid, '@(%d+)') end
  function due_of(fid) return tonumber(match(fid, '@(%d+)')) end
  function split_fire(fid)
    local at = find(fid, '@', 1, true)
    local tag = find(fid, '#', at, true)
    return sub(fid, 1, at - 1), sub(fid, at + 1, tag and tag - 1 or -1), tag ~= nil
  end
  function is_cron_fire(fid) return match(fid, '^[^@]*@%d+$') ~= nil end
  function fire_head(job) return job .. '@' end
  function has_head(fid, head) return sub(fid, 1, #head) == head end
end
