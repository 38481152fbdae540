-- One alert's state, saved compare-and-swap. KEYS[1]: the alert states hash. ARGV: name, expected version, the
-- state's JSON (kept as sent: never decoded here). Returns {'ok', new version} or {'stale', stored version}.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local version = 0
if cur then version = tonumber(cjson.decode(cur)['version']) end
if version ~= tonumber(ARGV[2]) then return {'stale', version} end
redis.call('HSET', KEYS[1], ARGV[1], '{"version":' .. (version + 1) .. ',"data":' .. ARGV[3] .. '}')
return {'ok', version + 1}
