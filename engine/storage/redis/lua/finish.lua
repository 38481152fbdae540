-- Record an execution outcome if the caller still holds the claim. Mirrors execution.py:finished.
-- KEYS[1] claim hash. ARGV: holder, attempt, state ('succeeded'/'failed'), result_json
local k = KEYS[1]
local f = redis.call('HMGET', k, 'holder', 'attempt', 'state', 'action_hash', 'lease_until')
if not f[1] or f[3] ~= 'running' or f[1] ~= ARGV[1] or f[2] ~= ARGV[2] then return {'fenced'} end
redis.call('HSET', k, 'state', ARGV[3], 'result', ARGV[4])
return {'ok', f[4], f[5]}
