-- approval_new(k, ak, dk, audit, doc, fields): write a new approval's hash, static document and first audit line,
-- and announce the new approval on "<prefix>:created".
-- Needs chain_push (include chain first).
local function approval_new(k, ak, dk, audit, doc, fields)
  redis.call('SET', dk, doc)
  redis.call('HSET', k, unpack(fields))
  chain_push(ak, audit)
  -- Announce it: a running `hitl serve` cards it at once (the key is "<prefix>:{<id>}").
  local prefix, id = string.match(k, '^(.*):{([^}]*)}$')
  if prefix then redis.call('PUBLISH', prefix .. ':created', id) end
end
