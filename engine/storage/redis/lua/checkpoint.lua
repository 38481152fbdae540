-- Save a run checkpoint if its version is still the expected one. KEYS[1] run hash.
-- ARGV: expected_version, data, now, status. Returns the new version and the previous status.
local k = KEYS[1]
local f = redis.call('HMGET', k, 'version', 'status')
local v = tonumber(f[1] or '0')
if v ~= tonumber(ARGV[1]) then return {'stale', tostring(v)} end
redis.call('HSET', k, 'version', v + 1, 'data', ARGV[2], 'updated_at', ARGV[3], 'status', ARGV[4])
return {'ok', tostring(v + 1), f[2] or ''}
