-- Record an execution outcome if the caller still holds the claim. Mirrors execution.py:finished.
-- KEYS[1] claim hash, KEYS[2] finished-claims index. ARGV: holder, attempt, state ('succeeded'/'failed'),
-- result_json, now, key
--#include claims
local f = claim_held(KEYS[1], ARGV[1], ARGV[2])
if not f then return {'fenced'} end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'result', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
return {'ok', f[4], f[5]}
