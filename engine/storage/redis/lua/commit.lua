-- One step boundary of a run, atomically: engine/domain/journal.py says what, engine/storage/sqlite/journal.py
-- is the same in SQL, and the conformance suite keeps the two in agreement. Every precondition is checked before
-- anything is written (a Lua script is atomic but cannot roll back).
-- KEYS: 1 run hash, 2 running-runs index, 3 paused-runs index, 4 events stream,
--       5 outcome claim, 6-8 its approval (hash, audit, doc), 9 next claim, 10-12 its approval,
--       13-15 asked approval, 16 its pending index, 17 due index, 18 all-approvals index, 19 pending roles,
--       20 ended-runs index, 21 finished-claims index, 22 the asked approval's ranked index, 23 the record of the
--       receipt issued with the next claim (written only when it is acquired for a new attempt), 24-25 that
--       receipt's approval (a batch's, for an item): its receipts' state (withdrawn refuses the commit) and its
--       audit chain (the receipt's issue is appended to it with the record)
-- ARGV[1]: the plan (JSON, built by engine/storage/redis/journal.py); times travel as strings, exactly.
--#include chain
--#include claims
--#include move
--#include events_chain
--#include approval_new
--#include ended
local P = cjson.decode(ARGV[1])
local run, now_s, holder = KEYS[1], P.now, P.holder
local now = tonumber(now_s)
local null = cjson.null

-- preconditions: ownership, checkpoint version, the outcome's claim, the asked approval
local r = redis.call('HMGET', run, 'holder', 'lease_until', 'version', 'status')
if P.own then
  if r[1] and r[1] ~= holder and tonumber(r[2]) > now then return {'not_owner', r[1]} end
elseif r[1] ~= holder then
  return {'not_owner', r[1] or ''}
end
local version = tonumber(r[3] or '0')
if P.cp ~= null and version ~= P.cp.expected then return {'stale', tostring(version)} end
if P.outcome ~= null and not claim_held(KEYS[5], holder, P.outcome.attempt) then return {'fenced'} end
if P.claim ~= null and P.claim.issued ~= null and redis.call('HGET', KEYS[24], 'state') == 'withdrawn' then
  return {'withdrawn'}
end
local asked = 'none'
local existing = {}
if P.ask ~= null then
  if redis.call('EXISTS', KEYS[13]) == 1 then
    local doc = redis.call('GET', KEYS[15])
    local stored = cjson.decode(doc)
    if stored.dedupe_key ~= P.ask.dedupe then return {'collision', stored.tool} end
    asked = 'existing'
    local d = redis.call('HMGET', KEYS[13], 'status', 'version', 'decisions', 'reason', 'approved_args',
      'superseded_by', 'updated_at')
    existing = {'', '', doc, d[1], d[2], d[3], d[4] or '', d[5] or '', d[6] or '', d[7] or ''}
    if d[1] ~= 'pending' then
      existing[1] = 'decided'
      existing[2] = tostring(version)
      return existing
    end
  end
end

-- writes
if P.own then
  redis.call('HSET', run, 'holder', holder, 'lease_until', P.lease_until)
  redis.call('ZADD', KEYS[2], P.lease_until, P.run_id)
end

local function executed(k, ak, aid, channel)
  local status = redis.call('HGET', k, 'status')
  if status == 'approved' then
    move_to(k, ak, aid, 'executing', now_s, holder, '', channel)
    status = 'executing'
  end
  if status == 'executing' then move_to(k, ak, aid, 'executed', now_s, holder, '', channel) end
end

if P.outcome ~= null then
  local o = P.outcome
  redis.call('HSET', KEYS[5], 'state', o.state, 'result', o.result)
  redis.call('ZADD', KEYS[21], now_s, o.key)
  if o.state == 'succeeded' and o.approval ~= '' then executed(KEYS[6], KEYS[7], o.approval, o.channel) end
end
if P.cp ~= null then
  version = version + 1
  redis.call('HSET', run, 'version', version, 'data', P.cp.data, 'updated_at', now_s, 'status', P.cp.status)
  index_ended(KEYS[20], P.run_id, r[4] or '', P.cp.status, now_s)
  local was, paused = r[4] == 'paused', P.cp.status == 'paused'
  if paused and not was then redis.call('ZADD', KEYS[3], 0, P.run_id)
  elseif was and not paused then redis.call('ZREM', KEYS[3], P.run_id) end
end
for _, body in ipairs(P.events) do events_push(KEYS[4], body) end
if asked == 'none' and P.ask ~= null then
  local a = P.ask
  redis.call('ZADD', KEYS[16], 'NX', a.created_at, a.id)
  redis.call('ZADD', KEYS[22], 'NX', a.rank, a.id)
  redis.call('ZADD', KEYS[17], 'NX', a.expires_at, a.id)
  redis.call('ZADD', KEYS[18], 'NX', a.created_at, a.id)
  redis.call('SADD', KEYS[19], a.role)
  approval_new(KEYS[13], KEYS[14], KEYS[15], a.audit, a.doc, a.fields, a.soon)
  asked = 'created'
end

local claim = {'none'}
if P.claim ~= null then
  local c = P.claim
  local status = ''
  if c.approval ~= '' then status = redis.call('HGET', KEYS[10], 'status') or 'missing' end
  local ok_status = c.approval == '' or status == 'approved' or status == 'executing'
  -- Peek first: a claim that would be acquired on an approval that is not approved is refused, claiming nothing.
  local f = redis.call('HMGET', KEYS[9], 'action_hash', 'state', 'lease_until')
  local would_acquire = (not f[1]) or (f[1] == c.hash and (f[2] == 'running' and now >= tonumber(f[3])
    or f[2] == 'failed' and c.retry_failed == '1'))
  if would_acquire and not ok_status then
    claim = {'not_approved', status}
  else
    claim = claim_next(KEYS[9], c.hash, holder, now_s, P.lease_until, c.retry_failed)
    if c.receipt ~= null then receipt_issued(KEYS[23], claim, c.receipt) end
    if c.issued ~= null and claim[1] == 'acquired' and claim[3] == '0' then chain_push(KEYS[25], c.issued) end
    if c.approval ~= '' and claim[1] == 'acquired' then
      move_to(KEYS[10], KEYS[11], c.approval, 'executing', now_s, holder, '', c.channel)
    elseif c.approval ~= '' and claim[1] == 'done' and ok_status then
      executed(KEYS[10], KEYS[11], c.approval, c.channel)
    end
  end
end
if P.release then
  if redis.call('HGET', run, 'holder') == holder then
    redis.call('HDEL', run, 'holder', 'lease_until')
    redis.call('ZADD', KEYS[2], 'XX', 0, P.run_id)
  end
end

local out = {'ok', tostring(version), asked}
for _, v in ipairs(existing) do out[#out + 1] = v end
for _, v in ipairs(claim) do out[#out + 1] = v end
return out
