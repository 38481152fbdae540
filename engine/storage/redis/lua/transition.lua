-- Move an approval along the state machine (expire, cancel, executing, executed, failed).
-- Mirrors engine/domain/execution.py:transitioned and decide.py:apply_expiry.
-- KEYS[1] approval hash, KEYS[2] audit list, KEYS[3] static document
-- ARGV: now, target, expected_version ('' = any), actor, reason ('' = keep), approval_id, detail, channel,
--       superseded_by ('' = keep), sources...
-- An expiry bound to no version is the clock's (expire_due): only a pending approval past its deadline; one bound
-- to a version is a decided move (an approved approval whose consequence drifted 3 times) the table allows.
--#include chain
--#include move
local k = KEYS[1]
local now_s, target = ARGV[1], ARGV[2]
local f = redis.call('HMGET', k, 'status', 'version', 'hash', 'expires_at')
if not f[1] then return {'missing'} end
local status, version = f[1], tonumber(f[2])
if target == 'expired' and ARGV[3] == '' and (status ~= 'pending' or tonumber(now_s) < tonumber(f[4])) then
  return {'skip', status}
end
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= version then return {'stale', status, tostring(version)} end
local allowed = false
for i = 10, #ARGV do if ARGV[i] == status then allowed = true end end
if not allowed then return {'illegal', status, tostring(version)} end
if ARGV[5] ~= '' then redis.call('HSET', k, 'reason', ARGV[5]) end
if ARGV[9] ~= '' then redis.call('HSET', k, 'superseded_by', ARGV[9]) end
move_to(k, KEYS[2], ARGV[6], target, now_s, ARGV[4], ARGV[7], ARGV[8])
local d = redis.call('HMGET', k, 'status', 'version', 'decisions', 'reason', 'approved_args', 'superseded_by',
  'updated_at')
return {'ok', '', redis.call('GET', KEYS[3]), d[1], d[2], d[3], d[4] or '', d[5] or '', d[6] or '', d[7] or ''}
