-- leases: the fires one claim takes, gathered as it takes them and written at its end with
-- one command per key. Each is leased to the worker (Keys.working: fire -> lease deadline,
-- ms) with a fencing token, its attempt number (Keys.attempts), and a claim (Keys.claims:
-- JSON {worker, token, due, claimed_at[, reclaimed]}, as cronsvc/client/views.py and
-- cronsvc/worker/records.py read it).
--   leases_of(worker, now, now_s, lease_ms)  the leases of one call (now_s: now's digits);
--                      a table of:
--     take(fid, due, token, reclaimed, before, payload)  lease fid: due, its due time (a
--                      string of digits); token, its attempt; reclaimed, 1 when the lease
--                      of a holder lapsed, else 0; before, that holder's claim JSON (or
--                      false); payload, its runtime schedule's (or nil)
--     count()          how many were taken
--     rows             what was taken, in order, flat as the claim's reply carries it:
--                      three values left for the reply's head, then per fire its fid,
--                      token, due (digits)
--     more(out, k)     what some fires have besides, after out[k] (most have neither: the
--                      reply carries three values a fire): the count of fires with a
--                      payload, then per such fire in order its number among the taken
--                      (from 1) and its payload; the count of fires reclaimed, then per such fire
--                      its number and before or ''; returns the new end of out
--     write(working, attempts, claims, payloads)  write the leases; the payload of a
--                      one-off fire (in hash payloads) is its payload
-- Keys.attempts also holds one field that is no fire, ATTEMPTS_PIN (cronsvc/keys.py, its
-- twin), whose value is longer than Redis keeps in a compact hash (hash-max-ziplist-value,
-- 64 bytes): the hash stays a hash table. A compact one is scanned whole on every lookup,
-- and a claim and an ack look up each fire (the claim's are mostly not there): with 100
-- fires in flight that scan was a fifth of their cost.
-- Keys.working is kept a skiplist too, with no member kept in it for that: while it holds
-- at most 128 fires Redis keeps it a compact list (zset-max-ziplist-entries; a listpack on
-- Redis 7), scanned twice by each ZADD and once by each ZREM and heartbeat. A claim that
-- finds it empty (no key) creates it with a member longer than such a list holds
-- (zset-max-ziplist-value, 64 bytes) named first, and takes that member out at once: the
-- set holds fire ids only whenever a script ends, and stays a skiplist until it is emptied
-- again. (One reloaded from disk with few fires, or made by an older version, stays a
-- compact list until then.)
-- @include bulk.lua
-- One literal each: a concatenation would run at every call.
local PIN_VALUE = 'not a fire: a value this long keeps the hash a hash table, not a compact list scanned on every lookup (lua/includes/leases.lua)'
local WIDE_MEMBER = 'not a fire: a member this long makes the working set a skiplist, not a compact list scanned on every lookup (lua/includes/leases.lua)'
local function leases_of(worker, now, now_s, lease_ms)
  -- Lua formats numbers with sprintf on every use: the ones used per fire are made once.
  local lease_until = string.format('%d', now + lease_ms)
  local head = '{"worker":' .. cjson.encode(worker) .. ',"token":'
  local tail = ',"claimed_at":' .. now_s
  -- One flat table a fire, no table per fire: the reply is this table itself.
  local w_args, c_args, rows, n = {false, false}, {}, {false, false, false}, 0
  local a_args = {'~pin', PIN_VALUE}
  -- The payloads by the fire's number (np of them); the fires reclaimed, flat: number,
  -- before (nr values).
  local pay, np, rec, nr = {}, 0, {}, 0

  local function take(fid, due, token, reclaimed, before, payload)
    local token_s = token == 1 and '1' or tostring(token)
    local i, r = 2 * n, 3 + 3 * n  -- the lists grow by a fixed step a fire: no length asked
    n = n + 1
    w_args[i + 3], w_args[i + 4] = lease_until, fid
    a_args[i + 3], a_args[i + 4] = fid, token_s
    c_args[i + 1] = fid
    c_args[i + 2] = head .. token_s .. ',"due":' .. due .. tail
      .. (reclaimed == 1 and ',"reclaimed":true}' or '}')
    rows[r + 1], rows[r + 2], rows[r + 3] = fid, token, due
    if payload and payload ~= '' then
      np = np + 1
      pay[n] = payload
    end
    if reclaimed == 1 then
      rec[nr + 1], rec[nr + 2] = n, before or ''
      nr = nr + 2
    end
  end

  local function more(out, k)
    out[k + 1] = np
    k = k + 1
    if np > 0 then
      for f = 1, n do
        local payload = pay[f]
        if payload then
          out[k + 1], out[k + 2] = f, payload
          k = k + 2
        end
      end
    end
    out[k + 1] = nr / 2
    for j = 1, nr do out[k + 1 + j] = rec[j] end
    return k + 1 + nr
  end

  local function write(working, attempts, claims, payloads)
    if n == 0 then return end
    if redis.call('ZCARD', working) == 0 then
      w_args[1], w_args[2] = '0', WIDE_MEMBER
      bulk('ZADD', working, w_args, 2)
      redis.call('ZREM', working, WIDE_MEMBER)
    else
      bulk('ZADD', working, w_args, 2, nil, 3)
    end
    bulk('HSET', attempts, a_args, 2)
    bulk('HSET', claims, c_args, 2)
    if redis.call('HLEN', payloads) > 0 then
      local ids = {}
      for i = 1, n do ids[i] = rows[3 * i + 1] end
      local given = redis.call('HMGET', payloads, unpack(ids))
      for i = 1, n do
        local payload = given[i]
        if payload then
          if not pay[i] then np = np + 1 end
          pay[i] = payload
        end
      end
    end
  end

  return {take = take, count = function() return n end, rows = rows, more = more,
    write = write}
end
