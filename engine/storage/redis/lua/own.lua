-- Take, keep, renew or give up ownership of a run. KEYS[1] run hash.
-- ARGV: op ('own' | 'renew' | 'release'), holder, now, lease_until
local f = redis.call('HMGET', KEYS[1], 'holder', 'lease_until')
local op, holder = ARGV[1], ARGV[2]
if op == 'release' then
  if f[1] == holder then redis.call('HDEL', KEYS[1], 'holder', 'lease_until') end
  return {1}
end
if op == 'renew' and f[1] ~= holder then return {0} end
if op == 'own' and f[1] and f[1] ~= holder and tonumber(f[2]) > tonumber(ARGV[3]) then return {0} end
redis.call('HSET', KEYS[1], 'holder', holder, 'lease_until', ARGV[4])
return {1}
