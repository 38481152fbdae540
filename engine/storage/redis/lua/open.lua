-- Take ownership of a run to resume it, and read its checkpoint, the approval it waits on and its session's
-- trust grants. KEYS: 1 run hash, 2 running-runs index, 3 the session's trust grants hash (fields: JSON
-- [requester, tool]; returned as they are, for the caller to keep the run's own requester's).
-- ARGV: run_id, holder, now, lease_until, approval key prefix ("<prefix>:{"): the waiting approval's keys are
-- known only once the checkpoint is read.
local run = KEYS[1]
local r = redis.call('HMGET', run, 'data', 'version', 'holder', 'lease_until')
if not r[1] then return {'missing'} end
if r[3] and r[3] ~= ARGV[2] and tonumber(r[4]) > tonumber(ARGV[3]) then return {'not_owner', r[3]} end
redis.call('HSET', run, 'holder', ARGV[2], 'lease_until', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
local trusted = {}
local grants = redis.call('HGETALL', KEYS[3])
for i = 1, #grants, 2 do
  local g = cjson.decode(grants[i + 1])
  if tonumber(g[1]) > tonumber(ARGV[3]) then trusted[#trusted + 1] = grants[i] end
end
local out = {'ok', r[1], r[2], cjson.encode(trusted)}
local waiting = cjson.decode(r[1]).waiting
if type(waiting) == 'string' then
  local k = ARGV[5] .. waiting .. '}'
  local doc = redis.call('GET', k .. ':doc')
  if doc then
    local d = redis.call('HMGET', k, 'status', 'version', 'decisions', 'reason', 'approved_args', 'superseded_by',
      'updated_at')
    for _, v in ipairs({'', '', doc, d[1], d[2], d[3], d[4] or '', d[5] or '', d[6] or '', d[7] or ''}) do
      out[#out + 1] = v
    end
  end
end
return out
