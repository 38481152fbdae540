-- Save a run checkpoint if its version is still the expected one. KEYS[1] run hash, KEYS[2] ended-runs index.
-- ARGV: expected_version, data, now, status, run_id. Returns the new version and the previous status.
--#include ended
local k = KEYS[1]
local f = redis.call('HMGET', k, 'version', 'status')
local v = tonumber(f[1] or '0')
if v ~= tonumber(ARGV[1]) then return {'stale', tostring(v)} end
redis.call('HSET', k, 'version', v + 1, 'data', ARGV[2], 'updated_at', ARGV[3], 'status', ARGV[4])
index_ended(KEYS[2], ARGV[5], f[2] or '', ARGV[4], ARGV[3])
return {'ok', tostring(v + 1), f[2] or ''}
