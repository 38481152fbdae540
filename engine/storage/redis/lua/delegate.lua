-- Delegations: give or end one, with its audit entry, in one step.
-- KEYS[1] the delegations (a hash: id -> JSON), KEYS[2] each delegator's latest (a hash: delegator -> id),
-- KEYS[3] the events stream.
-- ARGV[1] id, ARGV[2] the delegation's JSON after this step, ARGV[3] the audit entry's JSON, ARGV[4] now,
-- ARGV[5] the delegator, ARGV[6] '' to give it, else the JSON it must still be to end it.
-- Returns {1, ''} when written; {0, the delegation in force that stands in the way, or ''} when not.
--#include events_chain
if ARGV[6] == '' then
  local latest = redis.call('HGET', KEYS[2], ARGV[5])
  if latest then
    local doc = redis.call('HGET', KEYS[1], latest)
    if doc then
      local d = cjson.decode(doc)
      if d['ended_at'] == cjson.null and tonumber(d['until']) > tonumber(ARGV[4]) then return {0, doc} end
    end
  end
  if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {0, ''} end
  redis.call('HSET', KEYS[2], ARGV[5], ARGV[1])
else
  if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[6] then return {0, ''} end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
events_push(KEYS[3], ARGV[3])
return {1, ''}
