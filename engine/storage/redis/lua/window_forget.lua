-- Remove one event from a rolling window (its action ended without running). KEYS[1] the window's zset, KEYS[2] its
-- events' prior stats; ARGV[1] the event id (members are "event_id|amount"). Its work is bounded by the events inside
-- one window.
local gone = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.match(m, '^(.*)|[^|]*$') == ARGV[1] then gone = gone + redis.call('ZREM', KEYS[1], m) end
end
redis.call('HDEL', KEYS[2], ARGV[1])
return {gone}
