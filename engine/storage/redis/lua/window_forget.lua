-- Remove one event from a rolling window (its action ended without running). KEYS[1] the window's zset; ARGV[1] the
-- event id (members are "event_id|amount"). Its work is bounded by the events inside one window.
local own = ARGV[1] .. '|'
local gone = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 1, #own) == own then gone = gone + redis.call('ZREM', KEYS[1], m) end
end
return {gone}
