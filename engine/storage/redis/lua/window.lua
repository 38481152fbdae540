-- Read a rolling window's prior count and sum, then add this event. KEYS[1] the window's zset (members are
-- "event_id|amount"), KEYS[2] a hash of each event's prior stats ("count|total") as it found them when it was first
-- counted. The event itself never counts toward its own prior stats; an event already in the window is not added
-- again, and answers the stats it found then (an older hitl's event, with none kept: the window as it stands).
-- ARGV: now, window_start (exclusive), member ("event_id|amount" or '' to only read), ttl_seconds, event_id
-- Returns {count, total, added ('1' or '0')}.
local k, priors = KEYS[1], KEYS[2]
for _, m in ipairs(redis.call('ZRANGEBYSCORE', k, '-inf', ARGV[2])) do
  redis.call('HDEL', priors, string.match(m, '^(.*)|[^|]*$'))
end
redis.call('ZREMRANGEBYSCORE', k, '-inf', ARGV[2])
local members = redis.call('ZRANGEBYSCORE', k, '(' .. ARGV[2], '+inf')
local total, count, found = 0, 0, false
for _, m in ipairs(members) do
  local id, amount = string.match(m, '^(.*)|([^|]*)$')
  if ARGV[5] ~= '' and id == ARGV[5] then
    found = true
  else
    total = total + tonumber(amount)
    count = count + 1
  end
end
if ARGV[3] ~= '' and found then
  local kept = redis.call('HGET', priors, ARGV[5])
  if kept then
    local c, t = string.match(kept, '^([^|]*)|(.*)$')
    return {c, t, '0'}
  end
  return {tostring(count), string.format('%.17g', total), '0'}
end
if ARGV[3] ~= '' then
  redis.call('ZADD', k, 'NX', ARGV[1], ARGV[3])
  redis.call('HSET', priors, ARGV[5], tostring(count) .. '|' .. string.format('%.17g', total))
  redis.call('EXPIRE', k, ARGV[4])
  redis.call('EXPIRE', priors, ARGV[4])
  return {tostring(count), string.format('%.17g', total), '1'}
end
return {tostring(count), string.format('%.17g', total), '0'}
