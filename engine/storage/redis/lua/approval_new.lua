-- approval_new(k, ak, dk, audit, doc, fields): write a new approval's hash, static document and first audit line.
-- Needs chain_push (include chain first).
local function approval_new(k, ak, dk, audit, doc, fields)
  redis.call('SET', dk, doc)
  redis.call('HSET', k, unpack(fields))
  chain_push(ak, audit)
end
