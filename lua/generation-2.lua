-- generation: make a job file the newest published generation (compare and set).
-- KEYS[1] generation   hash: gen, digest, planner, at, jobs of the newest published file
-- KEYS[2] generations  hash: file digest -> the generation it was last published as
-- ARGV[1] now_ms, or '' for the server clock
-- ARGV[2] digest of the job file
-- ARGV[3] planner id publishing it
-- ARGV[4] the generation the caller saw as newest ('' = take it whatever is newest)
-- ARGV[5] number of jobs in the file
-- Returns {generation, status}: status 1 the file is now the newest generation (a new
-- number), 0 it was the newest already (nothing written), -1 another file was published
-- since the caller looked (nothing written; the newest generation is returned).
-- @include now.lua
local gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')
if redis.call('HGET', KEYS[1], 'digest') == ARGV[2] then return {gen, 0} end
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= gen then return {gen, -1} end
gen = gen + 1
redis.call('HSET', KEYS[1], 'gen', gen, 'digest', ARGV[2], 'planner', ARGV[3],
  'at', string.format('%d', now), 'jobs', ARGV[5])
redis.call('HSET', KEYS[2], ARGV[2], gen)
return {gen, 1}
