-- policy: a job's policy line (Keys.jobs), as the planner publishes it. Its twin is
-- cronsvc/policy.py, which writes the line and says what each field means: a field added or
-- moved there is added or moved here.
--   digest|catch_up|deadline_ms|overlap|max_attempts|paused|definition|notify|pause_after|
--   max_concurrent|limits|pool|then        (empty fields at its end left out)
--   policy_digest(line)  its first field, the schedule digest, with nothing else parsed
--   parse_policy(line)   the fields a claim judges fires by, in one pattern match: a table
--                        of catch_up, deadline (ms, 0: none), overlap, max_attempts,
--                        paused (the file pauses the job), definition, mask (notify),
--                        pause_after (0: never), most (max_concurrent, 0: no bound),
--                        limits ({name, cap} each), bounded (most or a limit bounds it),
--                        on_failure (the jobs then's 'f=' names, or nil); nil for a line
--                        of fewer than six fields, not a policy line (Policy.is_line)
local policy_digest, parse_policy
do
  local match, gmatch = string.match, string.gmatch
  -- pool, the twelfth field, is the planner's (which queue a fire waits in): skipped.
  local LINE = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|?([^|]*)|?([^|]*)|?([^|]*)'
    .. '|?([^|]*)|?([^|]*)|?[^|]*|?([^|]*)$'
  function policy_digest(line) return match(line, '^[^|]*') end
  function parse_policy(line)
    local digest, catch_up, deadline, overlap, max_attempts, paused, definition, mask,
      pause_after, most, limits, chain = match(line, LINE)
    if not digest then return nil end
    local caps = {}
    for name, cap in gmatch(limits, '([^,:]+):(%d+)') do
      -- A cap below 1 is no line a planner writes (the file refuses it): one written by
      -- hand bounds nothing, rather than leave a fire waiting behind no run at all.
      if tonumber(cap) >= 1 then caps[#caps + 1] = {name = name, cap = tonumber(cap)} end
    end
    most = tonumber(most) or 0
    return {catch_up = catch_up, deadline = tonumber(deadline) or 0, overlap = overlap,
      max_attempts = tonumber(max_attempts) or 1, paused = paused == '1',
      definition = definition, mask = mask, pause_after = tonumber(pause_after) or 0,
      most = most, limits = caps, bounded = most > 0 or #caps > 0,
      on_failure = match(chain, 'f=([^;]*)')}
  end
end
