-- Create an approval unless its id exists (ids derive from the dedupe key, so this is the dedupe step).
-- KEYS[1] approval hash, KEYS[2] audit list, KEYS[3] static document.
-- ARGV: audit_json, doc, field, value, field, value, ...
-- Append an audit entry to its approval's chain: its link covers the previous link and its own text.
local function chain_push(key, body)
  local last = redis.call('LINDEX', key, -1)
  local prev = ''
  if last then prev = string.match(last, '"link":"(%x+)"}$') or '' end
  local link = redis.sha1hex(prev .. '\n' .. body)
  redis.call('RPUSH', key, string.sub(body, 1, -2) .. ',"prev":"' .. prev .. '","link":"' .. link .. '"}')
end
local k = KEYS[1]
if redis.call('EXISTS', k) == 1 then
  local d = redis.call('HMGET', k, 'status', 'version', 'decisions', 'reason', 'approved_args', 'superseded_by',
    'updated_at')
  return {'existing', '', redis.call('GET', KEYS[3]), d[1], d[2], d[3], d[4] or '', d[5] or '', d[6] or '',
    d[7] or ''}
end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('SET', KEYS[3], ARGV[2])
redis.call('HSET', k, unpack(fields))
chain_push(KEYS[2], ARGV[1])
return {'created'}
