-- Read a rolling window's prior count and sum, then add this event. KEYS[1] zset.
-- The event itself never counts toward its own prior stats, so re-asking the same action is not double counted.
-- ARGV: now, window_start (exclusive), member ("event_id|amount" or ''), ttl_seconds, event_id
local k = KEYS[1]
redis.call('ZREMRANGEBYSCORE', k, '-inf', ARGV[2])
local members = redis.call('ZRANGEBYSCORE', k, '(' .. ARGV[2], '+inf')
local total, count, own = 0, 0, ARGV[5] .. '|'
for _, m in ipairs(members) do
  if ARGV[5] == '' or string.sub(m, 1, #own) ~= own then
    total = total + tonumber(string.match(m, '|([^|]*)$'))
    count = count + 1
  end
end
if ARGV[3] ~= '' then
  redis.call('ZADD', k, 'NX', ARGV[1], ARGV[3])
  redis.call('EXPIRE', k, ARGV[4])
end
return {tostring(count), string.format('%.17g', total)}
