-- leases: the fires one claim takes, gathered as it takes them and written at its end with
-- one command per key. Each is leased to the worker (Keys.working: fire -> lease deadline,
-- ms) with a fencing token, its attempt number (Keys.attempts), and a claim (Keys.claims:
-- JSON {worker, token, due, claimed_at[, reclaimed]}, as cronsvc/client/views.py and
-- cronsvc/worker/records.py read it).
--   leases_of(worker, now, lease_ms)  the leases of one call; a table of:
--     take(fid, due, token, reclaimed, before, payload)  lease fid: due, its due time (a
--                      string of digits); token, its attempt; reclaimed, 1 when the lease
--                      of a holder lapsed, else 0; before, that holder's claim JSON (or
--                      false); payload, its runtime schedule's (or nil)
--     taken            what was taken, in order: {fid, token, due ms, reclaimed, payload or
--                      '', before or ''} each
--     write(working, attempts, claims, payloads)  write the leases; the payload of a
--                      one-off fire (in hash payloads) goes into its entry of taken
-- @include bulk.lua
local function leases_of(worker, now, lease_ms)
  -- Lua formats numbers with sprintf on every use: the ones used per fire are made once.
  local lease_until = string.format('%d', now + lease_ms)
  local head = '{"worker":' .. cjson.encode(worker) .. ',"token":'
  local tail = ',"claimed_at":' .. string.format('%d', now)
  local w_args, a_args, c_args, taken, n = {}, {}, {}, {}, 0

  local function take(fid, due, token, reclaimed, before, payload)
    local token_s = token == 1 and '1' or tostring(token)
    local i = 2 * n  -- the three argument lists grow by two a fire: no length asked
    n = n + 1
    w_args[i + 1], w_args[i + 2] = lease_until, fid
    a_args[i + 1], a_args[i + 2] = fid, token_s
    c_args[i + 1] = fid
    c_args[i + 2] = head .. token_s .. ',"due":' .. due .. tail
      .. (reclaimed == 1 and ',"reclaimed":true}' or '}')
    taken[n] = {fid, token, tonumber(due), reclaimed, payload or '', before or ''}
  end

  local function write(working, attempts, claims, payloads)
    if #taken == 0 then return end
    bulk('ZADD', working, w_args, 2)
    bulk('HSET', attempts, a_args, 2)
    bulk('HSET', claims, c_args, 2)
    if redis.call('HLEN', payloads) > 0 then
      local ids = {}
      for i, c in ipairs(taken) do ids[i] = c[1] end
      local given = redis.call('HMGET', payloads, unpack(ids))
      for i, c in ipairs(taken) do c[5] = given[i] or c[5] end
    end
  end

  return {take = take, taken = taken, write = write}
end
