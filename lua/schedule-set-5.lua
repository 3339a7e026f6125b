-- schedule-set: create or change runtime schedules, unqueue the fires of their old
-- definitions that have not started, and queue their first fires: all or nothing.
-- Per schedule a compare-and-set: the caller read its rev and mark, and computed from them
-- which fires to unqueue; if either moved since, that schedule is left as it is (retry) and
-- the caller reads it again. One call takes a batch, each schedule on its own; the reads
-- and writes of the batch go in a few commands.
-- KEYS[1] schedules        hash schedule id -> stored line (cronsvc/schedule/runtime.py)
-- KEYS[2] schedule_marks   zset schedule id -> planned up to, ms
-- KEYS[3] schedule_counts  hash job -> runtime schedules of this shard that run it
-- KEYS[4] queue            zset fire -> due time, ms
-- KEYS[5] events           list of JSON decisions, newest first, capped at 10000
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] g: the groups of new ones (schedules not read first, most of a bulk load, with
--         no fire to queue now)
-- ARGV[3..] the g groups, each: a job, n, then n times an id and its line to store (rev
--         1, written by the caller, as HSET takes them), then n times its new mark (each
--         id once: the marks' ZADD arguments are made here). One that is not there is
--         created; one there with this
--         definition is unchanged; another is left as it is (retry: read it first). A mark
--         of no schedule is overwritten, as a read would (it reads nothing to unqueue).
--         Then m, the other schedules of this call (each id once in all of the call), each:
--         its id; the rev read ('0': it did not exist; '?': not read, as a new one above
--         but a mark of no schedule asks for a read); the mark read ('' for none); the new
--         definition; actor; the new mark (every fire of the new definition at or before
--         it is queued here); u and d; then u fire ids of the old definition to unqueue,
--         and d due times (ms) of the new fires to queue
-- Like a published job's new digest, a new definition queues fires after now only: a new
-- fire due by now is left out, since the clock the caller planned from was read before this
-- call, and a fire of that id may have started (or ended) under the old definition already.
-- Events: one per changed schedule; the created ones of a call in one event (a bulk load
-- would push every other decision out of the capped list otherwise).
-- Returns the letters of the new ones, in order (n created, u unchanged, r retry), now
-- (ms: when the changes took effect), then per other schedule {'created' | 'changed' |
-- 'unchanged', rev}, or {'retry', rev} when the rev or the mark moved since they were
-- read; flat.
-- @include now.lua
-- @include events.lua
-- @include schedules.lua
-- @include fires.lua
-- @include bulk.lua
local function read_all(cmd, key, names)  -- one reply per name, in slices unpack() takes
  if #names <= 4000 then return redis.call(cmd, key, unpack(names)) end  -- most: one slice
  local out = {}
  for first = 1, #names, 4000 do
    local part = redis.call(cmd, key, unpack(names, first, math.min(first + 3999, #names)))
    for k = 1, #part do out[#out + 1] = part[k] end
  end
  return out
end
local sids, n_new = {}, 0
local i = 3
for _ = 1, tonumber(ARGV[2]) do  -- the ids of the new ones
  local n = tonumber(ARGV[i + 1])
  for f = i + 2, i + 2 * n, 2 do
    n_new = n_new + 1
    sids[n_new] = ARGV[f]
  end
  i = i + 2 + 3 * n
end
local others_at = i
local starts, other_sids = {}, {}
i = i + 1
for k = 1, tonumber(ARGV[others_at]) do
  starts[k], other_sids[k] = i, ARGV[i]
  sids[n_new + k] = ARGV[i]
  i = i + 8 + tonumber(ARGV[i + 6]) + tonumber(ARGV[i + 7])
end
local lines = #sids > 0 and read_all('HMGET', KEYS[1], sids) or {}
local marks_read = #other_sids > 0 and read_all('ZMSCORE', KEYS[2], other_sids) or {}
local out, sets, unqueue, queue, marks, counts, events = {}, {}, {}, {}, {}, {}, {}
local first_created, last_created, created_by  -- the created of this call: their ids
local n_sets, n_unqueue, n_queue, n_created = 0, 0, 0, 0  -- # is a search in Lua 5.1
-- the new ones: a group none of which is there is written as sent
local letters, r = {}, 0
i = 3
for _ = 1, tonumber(ARGV[2]) do
  local job, n = ARGV[i], tonumber(ARGV[i + 1])
  local pairs_at, marks_at, made = i + 2, i + 2 + 2 * n, 0
  local there = false
  for k = r + 1, r + n do
    if lines[k] then there = true break end
  end
  if not there then
    bulk('HSET', KEYS[1], ARGV, 2, nil, pairs_at, marks_at - 1)
    local scored, argv = {}, ARGV
    for k = 0, n - 1 do
      scored[2 * k + 1], scored[2 * k + 2] = argv[marks_at + k], argv[pairs_at + 2 * k]
    end
    bulk('ZADD', KEYS[2], scored, 2)
    letters[#letters + 1] = string.rep('n', n)
    made = n
    first_created = first_created or ARGV[pairs_at]
    last_created = ARGV[marks_at - 2]
  else
    for k = 0, n - 1 do
      local line, sent = lines[r + k + 1], ARGV[pairs_at + 2 * k + 1]
      if not line then
        local sid = ARGV[pairs_at + 2 * k]
        n_sets = n_sets + 2
        sets[n_sets - 1], sets[n_sets] = sid, sent
        marks[n_sets - 1], marks[n_sets] = ARGV[marks_at + k], sid
        made = made + 1
        first_created, last_created = first_created or sid, sid
        letters[#letters + 1] = 'n'
      elseif schedule_content(line) == schedule_content(sent) then
        letters[#letters + 1] = 'u'
      else
        letters[#letters + 1] = 'r'
      end
    end
  end
  r = r + n
  i = marks_at + n
  if made > 0 then
    counts[job] = (counts[job] or 0) + made
    n_created = n_created + made
    created_by = created_by or string.match(ARGV[pairs_at + 1], '^%d+|[%w]*%.[%w]*|([^|]*)|')
  end
end
out[1], out[2] = table.concat(letters), now
-- the others
for k, sid in ipairs(other_sids) do
  local at = starts[k]
  local read_rev, read_mark, content, actor = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3],
    ARGV[at + 4]
  local line, mark = lines[n_new + k], marks_read[k] or ''
  local rev = line and schedule_rev(line) or '0'
  if read_rev == '?' then  -- as read now if that changes nothing, else as not there
    if line and schedule_content(line) == content then read_rev, read_mark = rev, mark
    else read_rev, read_mark = '0', '' end
  end
  if rev ~= read_rev or (mark ~= read_mark and tonumber(mark) ~= tonumber(read_mark)) then
    out[2 * k + 1], out[2 * k + 2] = 'retry', tonumber(rev)
  elseif line and schedule_content(line) == content then
    out[2 * k + 1], out[2 * k + 2] = 'unchanged', tonumber(rev)
  else
    local new_rev = tonumber(rev) + 1
    local job = string.match(content, '^([^|]*)|')
    local old_job = line and schedule_policy(line) or nil
    n_sets = n_sets + 2
    sets[n_sets - 1] = sid
    sets[n_sets] = schedule_line(new_rev, now, line and schedule_created(line) or now, actor,
      content)
    marks[n_sets - 1], marks[n_sets] = ARGV[at + 5], sid
    if old_job ~= job then
      counts[job] = (counts[job] or 0) + 1
      if old_job then counts[old_job] = (counts[old_job] or 0) - 1 end
    end
    local first, u = at + 8, tonumber(ARGV[at + 6])
    for f = first, first + u - 1 do
      n_unqueue = n_unqueue + 1
      unqueue[n_unqueue] = ARGV[f]
    end
    for f = first + u, first + u + tonumber(ARGV[at + 7]) - 1 do
      if tonumber(ARGV[f]) > now then
        n_queue = n_queue + 2
        queue[n_queue - 1], queue[n_queue] = ARGV[f], fire_id(job, ARGV[f], sid)
      end
    end
    if line then
      events[#events + 1] = cjson.encode({event = 'schedule changed', schedule = sid,
        rev = new_rev, by = actor, unqueued = u, at = now})
    else
      n_created = n_created + 1
      first_created, last_created = first_created or sid, sid
      created_by = created_by or actor
    end
    out[2 * k + 1], out[2 * k + 2] = line and 'changed' or 'created', new_rev
  end
end
bulk('HSET', KEYS[1], sets, 2)
for job, delta in pairs(counts) do
  if delta ~= 0 and redis.call('HINCRBY', KEYS[3], job, delta) <= 0 then
    redis.call('HDEL', KEYS[3], job)
  end
end
bulk('ZREM', KEYS[4], unqueue, 1)
bulk('ZADD', KEYS[4], queue, 2, 'NX')
bulk('ZADD', KEYS[2], marks, 2)
if n_created == 1 then
  events[#events + 1] = cjson.encode({event = 'schedule created', schedule = first_created,
    rev = 1, by = created_by, unqueued = 0, at = now})
elseif n_created > 1 then
  events[#events + 1] = cjson.encode({event = 'schedules created', count = n_created,
    first = first_created, last = last_created, by = created_by, at = now})
end
if #events > 0 then
  bulk('LPUSH', KEYS[5], events, 1)
  trim_events(KEYS[5])
end
return out
