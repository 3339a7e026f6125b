-- output: the output a run kept (its head and tail, cronsvc/run/output.py), stored per fire
-- beside its history record: one hash per fire (Keys.output), field the attempt's start
-- (ms, the record's `started`), value the text; the hash expires `retention` ms after the
-- last run written to it. A run that printed nothing writes nothing.
--   keep_output(key, started, text, retention)  store one attempt's output
local function keep_output(key, started, text, retention)
  if text == '' then return end
  redis.call('HSET', key, started, text)
  redis.call('PEXPIRE', key, retention)
end
