-- history: a history record (cronsvc/history.py) as one JSON line, its fields in the
-- record's order; a field without a value is cjson.null. Built by hand: cjson writes a
-- table's fields in any order, and large integers in exponent notation.
--   history_line(record)  the line of a record, a table of its fields
local HISTORY_FIELDS = {'fire', 'job', 'status', 'reason', 'scheduled', 'started',
  'duration_ms', 'attempt', 'worker', 'exit_code', 'output'}
local function history_line(record)
  local parts = {}
  for i, field in ipairs(HISTORY_FIELDS) do
    local value = record[field]
    if type(value) == 'number' then
      value = string.format('%d', value)
    else
      value = cjson.encode(value == nil and cjson.null or value)
    end
    parts[i] = '"' .. field .. '":' .. value
  end
  return '{' .. table.concat(parts, ',') .. '}'
end
