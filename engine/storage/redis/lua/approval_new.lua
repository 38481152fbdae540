-- approval_new(k, ak, dk, audit, doc, fields, soon): write a new approval's hash, static document and first audit
-- line, index it under its backup role too (when it has one: its backup reviewers' lists find it once it is handed
-- on; the page script checks when) and at soon, when it becomes due soon (the queue's "due soon" index; the score
-- is the index's alone, never a field of the hash: a 17th field doubles the hash's table, +176 B an approval for as
-- long as it is kept), and announce the new approval on "<prefix>:created".
-- Needs chain_push (include chain first).
local function approval_new(k, ak, dk, audit, doc, fields, soon)
  redis.call('SET', dk, doc)
  redis.call('HSET', k, unpack(fields))
  chain_push(ak, audit)
  -- Announce it: a running `hitl serve` cards it at once (the key is "<prefix>:{<id>}").
  local prefix, id = string.match(k, '^(.*):{([^}]*)}$')
  local b = redis.call('HMGET', k, 'backup', 'created_at', 'rank')
  if prefix then redis.call('ZADD', prefix .. ':soon', 'NX', soon, id) end
  if prefix and b[1] and b[1] ~= '' then
    redis.call('ZADD', prefix .. ':pending:' .. b[1], 'NX', b[2], id)
    redis.call('ZADD', prefix .. ':ranked:' .. b[1], 'NX', b[3], id)
  end
  if prefix then redis.call('PUBLISH', prefix .. ':created', id) end
end
