-- events: the list of JSON decisions (newest first) every script adds to, capped here once.
--   push_event(key, event)  add one event to list `key`, and cap the list
--   add_event(key, event)   add one of a batch; trim_events(key) caps the list once after
local EVENTS_KEPT = 10000  -- entries kept: LTRIM 0 9999
local function add_event(key, event) redis.call('LPUSH', key, event) end
local function trim_events(key) redis.call('LTRIM', key, 0, EVENTS_KEPT - 1) end
local function push_event(key, event)
  redis.call('LPUSH', key, event)
  redis.call('LTRIM', key, 0, EVENTS_KEPT - 1)
end
