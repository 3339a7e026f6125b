-- events: the list of JSON decisions (newest first) every script adds to, capped here once.
local EVENTS_KEPT = 10000  -- entries kept: LTRIM 0 9999
-- A batch of events: add_event each, then trim_events once.
local function add_event(key, event) redis.call('LPUSH', key, event) end
local function trim_events(key) redis.call('LTRIM', key, 0, EVENTS_KEPT - 1) end
-- One event: add it and trim the list.
local function push_event(key, event)
  redis.call('LPUSH', key, event)
  redis.call('LTRIM', key, 0, EVENTS_KEPT - 1)
end
