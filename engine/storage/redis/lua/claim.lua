-- Claim execution under an idempotency key. Mirrors engine/domain/execution.py:next_claim.
-- KEYS[1] claim hash. ARGV: action_hash, holder, now, lease_until, retry_failed ('1'/'0')
local k = KEYS[1]
local f = redis.call('HMGET', k, 'action_hash', 'holder', 'attempt', 'state', 'lease_until', 'result')
if not f[1] then
  redis.call('HSET', k, 'action_hash', ARGV[1], 'holder', ARGV[2], 'attempt', 1, 'state', 'running',
    'lease_until', ARGV[4])
  return {'acquired', '1', '0'}
end
if f[1] ~= ARGV[1] then return {'hash_mismatch', f[1]} end
local state = f[4]
if state == 'succeeded' or (state == 'failed' and ARGV[5] ~= '1') then
  return {'done', f[2], f[3], state, f[5], f[6] or ''}
end
if state == 'running' and tonumber(ARGV[3]) < tonumber(f[5]) then return {'in_progress', f[2], f[3]} end
local attempt = tonumber(f[3]) + 1
redis.call('HSET', k, 'holder', ARGV[2], 'attempt', attempt, 'state', 'running', 'lease_until', ARGV[4])
redis.call('HDEL', k, 'result')
local recovered = '0'
if state == 'running' then recovered = '1' end
return {'acquired', tostring(attempt), recovered}
