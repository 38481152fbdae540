-- One page of pending approvals across several role indexes, lowest score first (the creation-time indexes: oldest
-- first; the ranked ones: most important first), in one round trip: the indexes are scanned for pending entries
-- (stale ones, decided since they were indexed, are dropped from their index), merged, and only the page's own
-- approvals are read.
-- KEYS: the indexes. ARGV: after_score ('' = from the start), after_id, want, exclude_requester ('' = none),
-- approval key prefix ("<prefix>:{"): an approval's keys are known only from the index; ARGV[6] 'count': only
-- count them (up to want), 'soon': only those scored below now (the due-soon index: those due soon by now);
-- ARGV[7] now ('' = none), ARGV[8] '1' when roles are asked for, ARGV[9..] those roles
-- (ARGV[8] absent: every role): an approval
-- found in the index of its backup role only counts once it is handed on by now (it is indexed there from the
-- start).
-- Returns: n, then n times: id, score, doc, status, version, decisions, reason, approved_args, superseded_by,
-- updated_at (a count: n alone).
local want = tonumber(ARGV[3])
local after_score = tonumber(ARGV[1])
local after_id, exclude, prefix = ARGV[2], ARGV[4], ARGV[5]
local now = tonumber(ARGV[7] or '')
local wanted, filtered = {}, ARGV[8] == '1'
for i = 9, #ARGV do wanted[ARGV[i]] = true end
-- Whether a reviewer of the roles asked for may see it: its role is theirs (or none), or it was handed on to one.
local function mine(role, backup, at)
  if not filtered or role == '' or wanted[role] then return true end
  return backup ~= '' and wanted[backup] and now ~= nil and at ~= '' and now >= tonumber(at)
end
local found, seen = {}, {}
local hi = '+inf'
if ARGV[6] == 'soon' then hi = '(' .. ARGV[7] end
for _, key in ipairs(KEYS) do
  local lo = '-inf'
  if after_score then lo = ARGV[1] end
  local offset, got = 0, 0
  while got < want do
    local batch = redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', offset, want * 2)
    if #batch == 0 then break end
    offset = offset + #batch / 2
    local stale = {}
    for i = 1, #batch, 2 do
      local id, raw = batch[i], batch[i + 1]
      local score = tonumber(raw)
      if not after_score or score > after_score or (score == after_score and id > after_id) then
        local f = redis.call('HMGET', prefix .. id .. '}', 'status', 'requester', 'role', 'backup', 'hand_on_at')
        if f[1] and f[1] ~= 'pending' then
          stale[#stale + 1] = id
        elseif f[1] and f[2] ~= exclude and not seen[id] and mine(f[3] or '', f[4] or '', f[5] or '') then
          seen[id] = true
          found[#found + 1] = {score, id, raw}
          got = got + 1
        end
      end
    end
    if #stale > 0 then
      redis.call('ZREM', key, unpack(stale))
      offset = offset - #stale
    end
  end
end
table.sort(found, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
local n = math.min(#found, want)
if ARGV[6] == 'count' then return {n} end
local out = {n}
for i = 1, n do
  local id = found[i][2]
  local k = prefix .. id .. '}'
  local d = redis.call('HMGET', k, 'status', 'version', 'decisions', 'reason', 'approved_args', 'superseded_by',
    'updated_at')
  out[#out + 1] = id
  out[#out + 1] = found[i][3]  -- the score as Redis wrote it: exact, unlike Lua's tostring
  out[#out + 1] = redis.call('GET', k .. ':doc') or ''
  for j = 1, 7 do out[#out + 1] = d[j] or '' end
end
return out
