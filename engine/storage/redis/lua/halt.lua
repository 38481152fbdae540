-- The stop switch: give or lift the order for one scope, with its audit entry, in one step.
-- KEYS[1] the orders (a hash: scope -> order JSON), KEYS[2] the events stream.
-- ARGV[1] scope, ARGV[2] the order's JSON ('' lifts it), ARGV[3] the audit entry's JSON.
-- Returns {1, the order it replaced or lifted, or ''}; lifting a scope with no order writes nothing: {0, ''}.
--#include events_chain
local before = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' then
  if before == '' then return {0, ''} end
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
events_push(KEYS[2], ARGV[3])
return {1, before}
