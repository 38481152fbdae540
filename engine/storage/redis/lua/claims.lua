-- Execution claims, shared by claim.lua, finish.lua and commit.lua. Mirrors engine/domain/execution.py.
-- claim_next(k, hash, holder, now, lease_until, retry_failed): the claim attempt's answer (claim.py reads it).
-- claim_check_finish(k, holder, attempt): nil when holder/attempt still hold k, else the refusal.
-- receipt_issued(r, out, record): records the receipt issued with a claim at r when the claim's answer out is a new
-- attempt (acquired, not recovered from a holder that stopped); record: the claim's key, exp, milliseconds kept.
local function claim_next(k, hash, holder, now, lease_until, retry_failed)
  local f = redis.call('HMGET', k, 'action_hash', 'holder', 'attempt', 'state', 'lease_until', 'result')
  if not f[1] then
    redis.call('HSET', k, 'action_hash', hash, 'holder', holder, 'attempt', 1, 'state', 'running',
      'lease_until', lease_until)
    return {'acquired', '1', '0'}
  end
  if f[1] ~= hash then return {'hash_mismatch', f[1]} end
  local state = f[4]
  if state == 'succeeded' or (state == 'failed' and retry_failed ~= '1') then
    return {'done', f[2], f[3], state, f[5], f[6] or ''}
  end
  if state == 'running' and tonumber(now) < tonumber(f[5]) then return {'in_progress', f[2], f[3]} end
  local attempt = tonumber(f[3]) + 1
  redis.call('HSET', k, 'holder', holder, 'attempt', attempt, 'state', 'running', 'lease_until', lease_until)
  redis.call('HDEL', k, 'result')
  local recovered = '0'
  if state == 'running' then recovered = '1' end
  return {'acquired', tostring(attempt), recovered}
end

local function claim_held(k, holder, attempt)
  local f = redis.call('HMGET', k, 'holder', 'attempt', 'state', 'action_hash', 'lease_until')
  if not f[1] or f[3] ~= 'running' or f[1] ~= holder or f[2] ~= attempt then return nil end
  return f
end

local function receipt_issued(r, out, record)
  if out[1] == 'acquired' and out[3] == '0' then
    redis.call('HSET', r, 'key', record[1], 'exp', record[2], 'redeemed', '0')
    redis.call('PEXPIRE', r, tonumber(record[3]))
  end
end
