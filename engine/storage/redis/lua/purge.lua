-- Retention's removals, one record per call. Each re-checks the record here, in the same atomic step that removes
-- it, so a record that changed since retention's scan is kept. ARGV[1] the kind, ARGV[2] the cutoff (records that
-- ended before it go), ARGV[3] the record's id. Returns how many records were removed.
--#include ended
local kind, cutoff, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if kind == 'run' then
  -- KEYS: run hash, ended-runs index, running-runs index
  local f = redis.call('HMGET', KEYS[1], 'status', 'updated_at')
  if not f[1] or not has_ended(f[1]) then
    redis.call('ZREM', KEYS[2], id)  -- gone, or running again: nothing to remove here
    return 0
  end
  if tonumber(f[2]) >= cutoff then return 0 end
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  return 1
end

if kind == 'claim' then
  -- KEYS: claim hash, finished-claims index (its score: when the claim finished)
  local state = redis.call('HGET', KEYS[1], 'state')
  if state ~= 'succeeded' and state ~= 'failed' then
    redis.call('ZREM', KEYS[2], id)  -- gone, or claimed again: the next outcome indexes it again
    return 0
  end
  local finished = redis.call('ZSCORE', KEYS[2], id)
  if not finished or tonumber(finished) >= cutoff then return 0 end
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], id)
  return 1
end

if kind == 'approval' then
  -- KEYS: hash, doc, all-approvals index, due index, chains index, pending index of its role, card hash, card's
  -- reverse key as an older hitl wrote it, run hash of its session, the approvals its message shows, ranked index
  -- of its role, the inbox filters' indexes of its tool, tier and requester, the decided index, the who-decided
  -- index. ARGV[4]: the final states, comma-separated; ARGV[5..]: its members of the who-decided index.
  local f = redis.call('HMGET', KEYS[1], 'status', 'updated_at')
  if not f[1] then return 0 end
  if not string.find(',' .. ARGV[4] .. ',', ',' .. f[1] .. ',', 1, true) then return 0 end
  if tonumber(f[2]) >= cutoff then return 0 end
  local run = redis.call('HGET', KEYS[9], 'status')
  if run == 'running' or run == 'paused' then return 0 end  -- its run may still read it
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[7], KEYS[8])
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[6], id)
  redis.call('ZREM', KEYS[11], id)
  redis.call('ZREM', KEYS[10], id)  -- a group card's other members stay on it
  for i = 12, 15 do redis.call('ZREM', KEYS[i], id) end
  for i = 5, #ARGV do redis.call('ZREM', KEYS[16], ARGV[i]) end
  redis.call('ZADD', KEYS[5], f[2], id)  -- its audit chain stays, for the audit retention
  return 1
end

if kind == 'trust' then
  -- KEYS: the session's grants, the trust-sessions set. Grants that lapsed before the cutoff go.
  local grants = redis.call('HGETALL', KEYS[1])
  local n = 0
  for i = 1, #grants, 2 do
    if tonumber(cjson.decode(grants[i + 1])[1]) < cutoff then
      redis.call('HDEL', KEYS[1], grants[i])
      n = n + 1
    end
  end
  if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], id) end
  return n
end
return redis.error_reply('unknown kind ' .. kind)
