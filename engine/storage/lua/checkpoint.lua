-- Save a run checkpoint if its version is still the expected one. KEYS[1] run hash.
-- ARGV: expected_version, data, now
local k = KEYS[1]
local v = tonumber(redis.call('HGET', k, 'version') or '0')
if v ~= tonumber(ARGV[1]) then return {'stale', tostring(v)} end
redis.call('HSET', k, 'version', v + 1, 'data', ARGV[2], 'updated_at', ARGV[3])
return {'ok', tostring(v + 1)}
