-- Retention's audit removal, atomically: append the purge entry to the events chain (it names the anchor, the link
-- the remaining chain starts after), then remove the events chain's oldest entries and whole approval chains.
-- KEYS[1] events stream, KEYS[2] chains index, KEYS[3..] the approval chains to remove.
-- ARGV[1] the stream's first id when planned ('' when empty), ARGV[2] the purge entry's JSON, ARGV[3] JSON list of
-- the stream ids to remove (the oldest, in order), ARGV[4] JSON list of the chains' approval ids (KEYS[3..]'s order).
-- Returns {'moved'} and changes nothing when another purge went first.
--#include events_chain
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local first_id = ''
if first[1] then first_id = first[1][1] end
if first_id ~= ARGV[1] then return {'moved'} end
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then return {'moved'} end
end
events_push(KEYS[1], ARGV[2])
local ids = cjson.decode(ARGV[3])
for i = 1, #ids do redis.call('XDEL', KEYS[1], ids[i]) end
if #ids > 0 then redis.call('HINCRBY', KEYS[1] .. ':head', 'n', -#ids) end
local aids = cjson.decode(ARGV[4])
for i = 1, #aids do
  redis.call('DEL', KEYS[i + 2], KEYS[i + 2] .. ':head')
  redis.call('ZREM', KEYS[2], aids[i])
end
return {'ok'}
