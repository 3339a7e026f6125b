-- schedules: the stored line of a runtime schedule (Keys.schedules), as in
-- cronsvc/schedule/runtime.py:
--   rev|created_ms|updated_ms|actor|job|paused|catch_up|deadline_ms|overlap|when|payload
--   schedule_rev(line)      the rev (a string of digits)
--   schedule_content(line)  everything after actor: the definition
--   schedule_policy(line)   job, paused ('1'/'0'), catch_up, deadline_ms, overlap, payload
--                           ('' where the job's own value applies, or there is no payload);
--                           nil for a line that is not a stored schedule
--   is_schedule_id(sid)     sid is a schedule id (SCHEDULE_ID of runtime.py)
local schedule_rev, schedule_content, schedule_policy, is_schedule_id
do
  local match = string.match
  function is_schedule_id(sid) return #sid <= 200 and match(sid, '^[%w][%w_.:/%-]*$') ~= nil end
  function schedule_rev(line) return match(line, '^(%d+)|') end
  function schedule_content(line) return match(line, '^%d+|%d+|%d+|[^|]*|(.*)$') end
  function schedule_policy(line)
    return match(line, '^%d+|%d+|%d+|[^|]*|([^|]*)|([01])|([^|]*)|(%d*)|([^|]*)|{[^|]*}|(.*)$')
  end
end
