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
--                        free (overlap allow and not bounded: no slot nor run in flight
--                        to look at),
--                        on_failure (the jobs then's 'f=' names, or nil); nil for a line
--                        of fewer than six fields, not a policy line (Policy.is_line).
--                        Jobs whose lines differ only in digest and definition (most of
--                        them, when the later fields are empty) share one parsed table:
--                        each gets a table of its definition that reads the rest from it,
--                        and takes what is written to it (paused, held) for itself
--   policy_shape(line)   the metatable over the shared parse of line's shape (its __index,
--                        read only) and the line's definition; nil for a line parse_policy
--                        refuses. The shape table is the call's: a reader may keep what it
--                        makes of the shape in it
local policy_digest, parse_policy, policy_shape
do
  local match, gmatch = string.match, string.gmatch
  -- The digest, first, is not captured (a string made costs), nor pool, the twelfth field,
  -- the planner's (which queue a fire waits in).
  -- (One literal: a concatenation would run at every call.)
  local LINE =
    '^[^|]*|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|?([^|]*)|?([^|]*)|?([^|]*)|?([^|]*)|?([^|]*)|?[^|]*|?([^|]*)$'
  -- A claim parses a line per shape per call (see parse_policy), a few per call: a table of
  -- the common values, made at every call, cost more than converting them.
  local function int(s, default)
    if s == '' then return default end
    return tonumber(s) or default
  end
  local NO_LIMITS = {}  -- of every line without limits (read only)
  function policy_digest(line) return match(line, '^[^|]*') end
  local function parse_line(line)
    local catch_up, deadline, overlap, max_attempts, paused, definition, mask,
      pause_after, most, limits, chain = match(line, LINE)
    if not catch_up then return nil end
    local caps = NO_LIMITS
    if limits ~= '' then
      caps = {}
      for name, cap in gmatch(limits, '([^,:]+):(%d+)') do
        -- A cap below 1 is no line a planner writes (the file refuses it): one written by
        -- hand bounds nothing, rather than leave a fire waiting behind no run at all.
        if tonumber(cap) >= 1 then caps[#caps + 1] = {name = name, cap = tonumber(cap)} end
      end
    end
    most = int(most, 0)
    return {catch_up = catch_up, deadline = int(deadline, 0), overlap = overlap,
      max_attempts = int(max_attempts, 1), paused = paused == '1',
      definition = definition, mask = mask, pause_after = int(pause_after, 0),
      most = most, limits = caps, bounded = most > 0 or #caps > 0,
      free = overlap == 'allow' and most == 0 and #caps == 0,
      on_failure = chain ~= '' and match(chain, 'f=([^;]*)') or nil}
  end
  -- A line: the five fields after the digest, the definition, and what follows it.
  local SPLIT = '^[^|]*|([^|]*|[^|]*|[^|]*|[^|]*|[^|]*)|?([^|]*)(.*)$'
  local shapes = {}  -- the line but digest and definition -> metatable over its parse, or false
  function policy_shape(line)
    local fields, definition, rest = match(line, SPLIT)
    if not fields then return nil end
    local key = rest == '' and fields or fields .. '|' .. rest
    local shape = shapes[key]
    if shape == nil then
      local shared = parse_line('|' .. key)
      shape = shared and {__index = shared} or false
      shapes[key] = shape
    end
    if shape then return shape, definition end
    return nil
  end
  function parse_policy(line)
    local shape, definition = policy_shape(line)
    -- paused and held are written per job (includes/policies.lua): made with the table, its
    -- hash part is not grown twice.
    return shape and setmetatable({definition = definition, paused = shape.__index.paused,
      held = false}, shape) or nil
  end
end
