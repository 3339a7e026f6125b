-- dispatch: the one writer of a dispatched fire's deliveries (cronsvc/run/dispatch.py).
-- KEYS[1] deliveries  stream of one fire: entries {d, state, t[, by, ms, error, output]}
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] op: begin | sent | start | end | lost
-- ARGV[3] d: the delivery (the attempt that first sent it); begin: the holder's attempt
-- ARGV[4] ttl_ms: how long the stream outlives its last entry
-- ARGV[5] start: who runs it; end: ok or failed; lost: why it was given up on
-- ARGV[6] end: how long it ran, ms
-- ARGV[7] end: its error ('' when ok)
-- ARGV[8] end: the tail of its output
--
-- Returns by op, below. The last entry is where the fire stands. A delivery is 'sending' from before its holder
-- sends it (so a holder that dies after the send leaves a mark the next one sees), 'sent'
-- once the broker took it, 'started' once a consumer's guard let it run, then 'ok',
-- 'failed' or, when its holder gave up waiting, 'lost'.
--   begin  -> {'send', d}     send delivery d (new: d is this attempt; or resend one
--                              a holder before may have sent)
--             {'wait', d}     d started: wait for its outcome, send nothing
--             {'done', d, state, ms, error, output}   d ended before this holder began
--   start  -> 1 run it, 0 a second delivery of d (or one given up on): skip it
--   sent, end, lost -> 1 written, 0 not (the stream moved on)
-- @include now.lua
local key, op, d, ttl = KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

local function last()
  local e = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
  if not e then return nil end
  local f = {}
  for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
  f.d = tonumber(f.d)
  return f
end

local function add(state, ...)
  redis.call('XADD', key, '*', 'd', d, 'state', state, 't', now, ...)
  redis.call('PEXPIRE', key, ttl)
  return 1
end

local l = last()
if op == 'begin' then
  if l and (l.state == 'sending' or l.state == 'sent') then return {'send', l.d} end
  if l and l.state == 'started' then return {'wait', l.d} end
  if l and l.state == 'ok' then
    return {'done', l.d, l.state, l.ms or '0', l.error or '', l.output or ''}
  end
  add('sending')  -- none yet, or the last one failed or was given up on: a new delivery
  return {'send', d}
end
local current = l and l.d == d
if op == 'sent' then
  if current and l.state == 'sending' then return add('sent') end
  return 0
elseif op == 'start' then
  -- No stream: it expired, or the message was not sent by a holder that began it.
  if not l or (current and (l.state == 'sending' or l.state == 'sent')) then
    return add('started', 'by', ARGV[5])
  end
  return 0
elseif op == 'end' then
  if current and l.state ~= 'ok' and l.state ~= 'failed' then
    return add(ARGV[5], 'ms', ARGV[6], 'error', ARGV[7], 'output', ARGV[8])
  end
  return 0
elseif op == 'lost' then
  if current and l.state ~= 'ok' and l.state ~= 'failed' then return add('lost', 'error', ARGV[5]) end
  return 0
end
return redis.error_reply('dispatch: unknown op ' .. tostring(op))
