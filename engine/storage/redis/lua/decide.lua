-- One decision, atomically. Mirrors engine/domain/decide.py (same checks, same order); the conformance
-- suite keeps them in agreement.
-- KEYS[1] approval hash, KEYS[2] its audit list, KEYS[3] its static document (same hash slot); KEYS[4..]: job
-- streams. The first ARGV[4] of them get one entry each when the decision is recorded (payload ARGV[3]); the
-- others (a run's resume) one entry each only when the decision left an approval of a workflow step decided
-- (payload: its session and id), mirroring engine/domain/decide.py's run_to_resume
-- ARGV[1]: a JSON array of strings (one argument packs faster than twelve): now, expected_version,
--       expected_hash, reviewer, kind, decision_json, reason, approved_args_json,
--       supersede_with, via, approval_id, answer_by (server seconds, '' for none), note (for the audit), the
--       digest of the view the decider saw and that view's JSON ('' for none: the entry says "no view shown"),
--       '1' when the surface checked what approving takes besides a click ('' otherwise), the ids a delegation
--       in force ties the reviewer to (newline-separated, '' for none), roles... (each 'name' when their own,
--       'name<TAB>delegator' when a delegation hands it to them);
--       ARGV[2]: the approval's pub/sub channel
-- A trust of an action also passes ARGV[5..8] (the grant's field, its value, the session, the audit note) and, as
-- the last two KEYS, the session's grants hash and the set of sessions with grants: the grant is written with the
-- decision when it leaves the approval approved (the caller passes none for any other kind: a practice approval's
-- Trust grants nothing).
--#include chain
--#include move
local k, ak = KEYS[1], KEYS[2]
local A = cjson.decode(ARGV[1])
local trusting = ARGV[5] ~= nil and ARGV[5] ~= ''
local streams = #KEYS
if trusting then streams = #KEYS - 2 end
local now_s, reviewer, kind, aid = A[1], A[4], A[5], A[11]
local now = tonumber(now_s)
local f = redis.call('HMGET', k, 'status', 'version', 'expires_at', 'hash', 'requester', 'role', 'quorum',
  'trustable', 'voters', 'approvals', 'decisions', 'reason', 'approved_args', 'superseded_by', 'updated_at',
  'attention', 'backup', 'hand_on_at', 'self', 'behalf')
if not f[1] then return {'missing'} end
local status, version = f[1], tonumber(f[2])
local ROLES = 18

local function audit(event, outcome, ver, detail, seen)
  chain_push(ak, '{"at":' .. now_s .. ',"actor":' .. cjson.encode(reviewer) .. ',"event":"' .. event ..
    '","approval_id":' .. cjson.encode(aid) .. ',"version":' .. ver .. ',"action_hash":"' .. f[4] ..
    '","outcome":"' .. outcome .. '","detail":' .. cjson.encode(detail) .. (seen or '') .. '}')
end

-- Fixed order, read by engine/storage/redis_codec.py:approval_from_result.
local function result(tag, code)
  return {tag, code, redis.call('GET', KEYS[3]), f[1], f[2], f[11], f[12] or '', f[13] or '', f[14] or '',
    f[15] or ''}
end

local function refuse(code)
  audit('refused', code, version, kind .. ' via ' .. A[10])
  return result('err', code)
end

if A[12] ~= '' then
  local t = redis.call('TIME')
  if tonumber(t[1]) + tonumber(t[2]) / 1000000 > tonumber(A[12]) then return refuse('too_late') end
end
if status ~= 'pending' then
  if status == 'expired' then return refuse('expired') end
  return refuse('already_decided')
end
if now >= tonumber(f[3]) then return refuse('expired') end
if tonumber(A[2]) ~= version then return refuse('stale_version') end
if A[3] ~= f[4] then return refuse('hash_mismatch') end
local people = {reviewer}
for id in string.gmatch(A[17], '[^\n]+') do people[#people + 1] = id end
local function is_person(id)
  for _, p in ipairs(people) do if p == id then return true end end
  return false
end
if is_person(f[5]) or (f[20] and is_person(f[20])) then return refuse('self_approval') end
-- Roles: 'name' held in the reviewer's own right, 'name\tdelegator' handed to them by a delegation in force.
local own, given, any_own = {}, {}, false
for i = ROLES, #A do
  local name, by = string.match(A[i], '^([^\t]*)\t(.*)$')
  if name then given[#given + 1] = {name, by} else own[A[i]] = true; any_own = true end
end
local function holds(name)
  if own[name] then return true end
  for _, g in ipairs(given) do if g[1] == name then return g[2] end end
  return nil
end
local role, eligible, acting = f[6], false, nil
local own_one = f[19] or ''
if own_one ~= '' then
  eligible = reviewer == own_one  -- a `self` approval: the person the agent acts for, alone, no delegation
elseif role == '' then
  eligible = #A >= ROLES
  if eligible and not any_own then acting = given[1][2] end
else
  local wanted = {role}
  if f[17] and f[17] ~= '' and f[18] and f[18] ~= '' and now >= tonumber(f[18]) then
    wanted[2] = f[17]  -- handed on to its backup role
  end
  local by_own = false
  for _, w in ipairs(wanted) do
    local h = holds(w)
    if h == true then by_own, eligible = true, true
    elseif h then eligible = true; if not acting then acting = h end end
  end
  if by_own then acting = nil end
end
if not eligible then return refuse('not_eligible') end
local voters = f[9]
for _, p in ipairs(people) do
  if string.find('\n' .. voters .. '\n', '\n' .. p .. '\n', 1, true) then return refuse('duplicate_vote') end
end
if kind == 'trust' and f[8] ~= '1' then return refuse('not_trustable') end
local approving = kind == 'approve' or kind == 'trust' or kind == 'modify'
if approving and f[16] == '1' and A[16] ~= '1' then return refuse('confirmation_mismatch') end
local quorum, supersede = tonumber(f[7]), A[9]
if kind == 'modify' and quorum > 1 and supersede == '' then return refuse('invalid_input') end

local approvals = tonumber(f[10])
if kind == 'approve' or kind == 'trust' then approvals = approvals + 1 end
local target = 'pending'
if kind == 'reject' or kind == 'feedback' then target = 'rejected'
elseif kind == 'modify' and supersede ~= '' then target = 'superseded'
elseif kind == 'modify' then target = 'approved'
elseif approvals >= quorum then target = 'approved' end

local decision = A[6]
if acting then decision = string.sub(decision, 1, -2) .. ',"acting_for":' .. cjson.encode(acting) .. '}' end
local decisions = f[11]
if decisions == '[]' then decisions = '[' .. decision .. ']'
else decisions = string.sub(decisions, 1, -2) .. ',' .. decision .. ']' end
local cast = reviewer
if acting then cast = cast .. '\n' .. acting end
if voters == '' then voters = cast else voters = voters .. '\n' .. cast end
version = version + 1
local reason, approved_args, superseded_by = f[12], f[13], f[14]
if kind == 'reject' or kind == 'feedback' then reason = A[7] end
if kind == 'modify' and target == 'approved' then approved_args = A[8] end
if target == 'superseded' then superseded_by = supersede end
-- Its creation time: the decided index's score (unindex) and the who-decided index's (below), read once.
local created
if target ~= 'pending' then created = unindex(k, aid, f[6], f[17])
else created = redis.call('ZSCORE', string.sub(k, 1, #k - #aid - 3) .. ':all', aid) end
redis.call('HSET', k, 'status', target, 'version', version, 'voters', voters, 'approvals', approvals,
  'decisions', decisions, 'updated_at', now_s, 'reason', reason or '', 'approved_args', approved_args or '',
  'superseded_by', superseded_by or '')
f[1], f[2], f[11], f[12], f[13], f[14], f[15] = target, tostring(version), decisions, reason, approved_args,
  superseded_by, now_s
-- Who decided what, for the inbox's reviewer filter (filters.py's voted_key and lex_time), in the decision's step.
if created then
  redis.call('ZADD', string.sub(k, 1, #k - #aid - 3) .. ':voted', 'NX', 0,
    reviewer .. '\t' .. string.format('%020.6f', tonumber(created)) .. '\t' .. aid)
end
local note, seen = '', ''
if A[14] == '' then note = '; no view shown'
else seen = ',"view_digest":"' .. A[14] .. '","view":' .. A[15] end
if acting then note = note .. '; acting for ' .. acting .. ' (delegation)' end
if own_one ~= '' then note = note .. '; basis self' end
if A[13] ~= '' then note = note .. '; ' .. A[13] end
if trusting and kind == 'trust' and target == 'approved' then
  redis.call('HSET', KEYS[streams + 1], ARGV[5], ARGV[6])
  redis.call('SADD', KEYS[streams + 2], ARGV[7])
  note = note .. '; ' .. ARGV[8]
end
audit('decided', 'ok', version, kind .. ' via ' .. A[10] .. ' -> ' .. target .. note, seen)
local plain = tonumber(ARGV[4] or '0')
for i = 4, 3 + plain do redis.call('XADD', KEYS[i], '*', 'payload', ARGV[3], 'at', now_s) end
if streams > 3 + plain and target ~= 'pending' then
  local doc = cjson.decode(redis.call('GET', KEYS[3]))
  local step = type(doc['metadata']) == 'table' and doc['metadata']['step']
  if step and step ~= cjson.null and step ~= '' then
    local resume = cjson.encode({session_id = doc['session_id'], approval_id = aid})
    for i = 4 + plain, streams do redis.call('XADD', KEYS[i], '*', 'payload', resume, 'at', now_s) end
  end
end
-- Wake every waiter on any replica (ARGV[2] is the approval's channel).
redis.call('PUBLISH', ARGV[2], target .. ':' .. version)
return result('ok', '')
