-- move_to(k, ak, aid, target, now_s, actor, detail, channel): move an approval to target (the caller checked the
-- state table), audited in its chain and announced on its channel; returns the new version.
-- Needs chain_push (include chain first).
-- unindex(k, aid, role, backup): take an approval that stops being pending out of its role's pending and ranked
-- indexes, the due index and the due-soon index, in the step that ends its pending state (no index ever holds decided
-- approvals for a later read to drop). The index keys follow from the approval's key ("<prefix>:{<id>}") and its
-- role, as connection.py lays them out. It enters the decided index (filters.py's decided_key), at its creation
-- time, in the same step, and returns that time (its score in "<prefix>:all"; false for none). A caller that has
-- read the approval's role and backup passes them (nil: read here), so a decide reads no field twice.
local function unindex(k, aid, role, backup)
  local prefix = string.sub(k, 1, #k - #aid - 3)
  if role == nil then role = redis.call('HGET', k, 'role') end
  if not role or role == '' then role = '*' end
  redis.call('ZREM', prefix .. ':pending:' .. role, aid)
  redis.call('ZREM', prefix .. ':ranked:' .. role, aid)
  if backup == nil then backup = redis.call('HGET', k, 'backup') end
  if backup and backup ~= '' then
    redis.call('ZREM', prefix .. ':pending:' .. backup, aid)
    redis.call('ZREM', prefix .. ':ranked:' .. backup, aid)
  end
  redis.call('ZREM', prefix .. ':due', aid)
  redis.call('ZREM', prefix .. ':soon', aid)
  local created = redis.call('ZSCORE', prefix .. ':all', aid)
  if created then redis.call('ZADD', prefix .. ':decided', 'NX', created, aid) end
  return created
end

local function move_to(k, ak, aid, target, now_s, actor, detail, channel)
  local f = redis.call('HMGET', k, 'version', 'hash', 'status')
  if f[3] == 'pending' and target ~= 'pending' then unindex(k, aid) end
  local version = tonumber(f[1]) + 1
  redis.call('HSET', k, 'status', target, 'version', version, 'updated_at', now_s)
  chain_push(ak, '{"at":' .. now_s .. ',"actor":' .. cjson.encode(actor) .. ',"event":"' .. target ..
    '","approval_id":' .. cjson.encode(aid) .. ',"version":' .. version .. ',"action_hash":"' .. f[2] ..
    '","outcome":"ok","detail":' .. cjson.encode(detail) .. '}')
  redis.call('PUBLISH', channel, target .. ':' .. version)
  return version
end
