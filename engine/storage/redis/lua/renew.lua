-- Extend a running execution claim's lease if the caller still holds it. KEYS[1] claim hash.
-- ARGV: holder, attempt, lease_until
local f = redis.call('HMGET', KEYS[1], 'holder', 'attempt', 'state')
if f[1] ~= ARGV[1] or f[2] ~= ARGV[2] or f[3] ~= 'running' then return {0} end
redis.call('HSET', KEYS[1], 'lease_until', ARGV[3])
return {1}
