-- policies: what a claim judges fires by, read once per call and only for the jobs of the
-- fires it looks at: each job's policy (its policy line, with whether this worker holds its
-- definition and whether a runtime pause holds the job) and each runtime schedule's (its
-- job's, with the schedule's overrides and payload).
--   policy_reader(jobs, job_lines, held, paused, schedules, any_definition)  a reader of
--                       those hashes (the claim's KEYS of those names; any_definition: every
--                       definition counts as held); a table of:
--     load(fire_jobs, parts, first, last)  read what this call has not read yet for the
--                       fires first..last, of jobs fire_jobs[i] (false ones are skipped) and
--                       parts[i] their fire_parts tables of fires.lua (nil for a fire that
--                       is '<job>@<due_ms>'): the policies of their jobs, then those of their
--                       runtime schedules, each kept in its fire's table (field policy: a
--                       fire is loaded once)
--     of(f)             the policy fire f (a fire_parts table) is judged by, or false: its
--                       job is not published, or its schedule is gone or runs another job
--                       now; then true if the schedule is why. A policy is a table over
--                       its line's shared parse (policy_shape) with held and paused (the
--                       file's or a runtime pause), one for the jobs of a shape alike in
--                       both; of a schedule, one over its job's with its payload
-- @include policy.lua
-- @include schedules.lua
local function policy_reader(jobs, job_lines, held, paused, schedules, any_definition)
  local of_job = {}  -- false: read, and not published
  -- The last stored line parsed, its job and the policy of its schedules: schedules written
  -- in one call with one definition (a bulk upsert's) have one line, and their fires come
  -- in runs (due together, in id order). (Not a table of lines: long strings that differ in
  -- a few bytes often hash alike in Lua, and chain in one slot.)
  local last_line, last_job, last_policy
  -- The last policy line split, its shape and definition: jobs alike but in name (one
  -- template's) share a line.
  local last_pline, last_shape, last_definition

  local function load_jobs(names)
    local want = {}
    for _, job in ipairs(names) do
      if of_job[job] == nil then want[#want + 1] = job; of_job[job] = false end
    end
    if #want == 0 then return end
    local lines = redis.call('HMGET', jobs, unpack(want))
    if job_lines ~= jobs then
      local other = {}
      for i in ipairs(want) do
        if not lines[i] then other[#other + 1] = i end
      end
      if #other > 0 then
        local missing = {}
        for j, i in ipairs(other) do missing[j] = want[i] end
        local mirrored = redis.call('HMGET', job_lines, unpack(missing))
        for j, i in ipairs(other) do lines[i] = mirrored[j] end
      end
    end
    local holds = any_definition and {} or redis.call('HMGET', held, unpack(want))
    local pauses = {}
    if redis.call('HLEN', paused) > 0 then pauses = redis.call('HMGET', paused, unpack(want)) end
    for i, job in ipairs(want) do
      -- A line that is not a policy line (written by hand) publishes no job: its fires are a
      -- removed job's until a planner publishes the job again.
      local line, shape, definition = lines[i], nil, nil
      if line == last_pline then  -- (jobs published from one template share a line)
        shape, definition = last_shape, last_definition
      elseif line then
        shape, definition = policy_shape(line)
        last_pline, last_shape, last_definition = line, shape, definition
      end
      if shape then
        local paused = shape.__index.paused or (pauses[i] or false) ~= false
        -- A line without a definition (an older planner's) needs the job, in any version.
        local holds_it = any_definition or (holds[i] or false) ~= false and
          (definition == '' or holds[i] == definition)
        -- Jobs of one shape alike in both share one policy table (read only but for the
        -- schedules' tables kept in it, which depend on nothing else): no table a job.
        local v = (paused and 2 or 1) + (holds_it and 2 or 0)
        local p = shape[v]
        if not p then
          p = setmetatable({paused = paused, held = holds_it}, shape)
          shape[v] = p
        end
        of_job[job] = p
      end
    end
  end

  local function load_schedules(fs)
    local want = {}
    for k, f in ipairs(fs) do want[k] = f.sid end
    local lines = redis.call('HMGET', schedules, unpack(want))
    for i, f in ipairs(fs) do
      local line, job_i, q = lines[i], f.job, false
      local p = of_job[job_i]
      if line and line == last_line and job_i == last_job then
        q = last_policy
      elseif line and p then
        local job, paused_s, catch_up, deadline, overlap, payload = schedule_policy(line)
        if job == job_i then
          p.inherit = p.inherit or {__index = p}
          if paused_s == '0' and catch_up == '' and deadline == '' and overlap == '' then
            -- Most schedules override nothing: theirs is the job's with their payload, one
            -- table per payload (read only, as every policy).
            local own = p.own
            if not own then own = {}; p.own = own end
            q = own[payload]
            if not q then q = setmetatable({payload = payload}, p.inherit); own[payload] = q end
          else
            -- The schedule's own values; the rest is its job's (one shared metatable per job).
            overlap = overlap ~= '' and overlap or p.overlap
            q = setmetatable({catch_up = catch_up ~= '' and catch_up or p.catch_up,
              deadline = deadline ~= '' and tonumber(deadline) or p.deadline,
              overlap = overlap, free = overlap == 'allow' and not p.bounded,
              paused = p.paused or paused_s == '1', payload = payload}, p.inherit)
          end
          last_line, last_job, last_policy = line, job, q
        end
      end
      f.policy = q
    end
  end

  local function load(fire_jobs, parts, first, last)
    local names, fs, k = {}, {}, 0
    for i = first, last do
      local job = fire_jobs[i]
      if job then
        k = k + 1
        names[k] = job
        local f = parts[i]
        if f and f.sid then fs[#fs + 1] = f end
      end
    end
    load_jobs(names)
    if #fs > 0 then load_schedules(fs) end
  end

  local function of(f)
    local p = of_job[f.job]
    if f.sid and p then
      p = f.policy
      return p, not p
    end
    return p, false
  end

  -- of_job: job -> its policy (or false), for the fires of no runtime schedule (f.sid nil)
  return {load = load, of = of, of_job = of_job}
end
