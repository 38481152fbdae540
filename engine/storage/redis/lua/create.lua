-- Create an approval unless its id exists (ids derive from the dedupe key, so this is the dedupe step).
-- KEYS[1] approval hash, KEYS[2] audit list, KEYS[3] static document.
-- ARGV: audit_json, doc, when it becomes due soon, field, value, field, value, ...
--#include chain
--#include approval_new
local k = KEYS[1]
if redis.call('EXISTS', k) == 1 then
  local d = redis.call('HMGET', k, 'status', 'version', 'decisions', 'reason', 'approved_args', 'superseded_by',
    'updated_at')
  return {'existing', '', redis.call('GET', KEYS[3]), d[1], d[2], d[3], d[4] or '', d[5] or '', d[6] or '',
    d[7] or ''}
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
approval_new(k, KEYS[2], KEYS[3], ARGV[1], ARGV[2], fields, ARGV[3])
return {'created'}
