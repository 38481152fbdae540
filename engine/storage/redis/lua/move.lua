-- move_to(k, ak, aid, target, now_s, actor, detail, channel): move an approval to target (the caller checked the
-- state table), audited in its chain and announced on its channel; returns the new version.
-- Needs chain_push (include chain first).
local function move_to(k, ak, aid, target, now_s, actor, detail, channel)
  local f = redis.call('HMGET', k, 'version', 'hash')
  local version = tonumber(f[1]) + 1
  redis.call('HSET', k, 'status', target, 'version', version, 'updated_at', now_s)
  chain_push(ak, '{"at":' .. now_s .. ',"actor":' .. cjson.encode(actor) .. ',"event":"' .. target ..
    '","approval_id":' .. cjson.encode(aid) .. ',"version":' .. version .. ',"action_hash":"' .. f[2] ..
    '","outcome":"ok","detail":' .. cjson.encode(detail) .. '}')
  redis.call('PUBLISH', channel, target .. ':' .. version)
  return version
end
