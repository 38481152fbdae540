-- Acknowledge jobs and delete them, on several streams at once, in one step (a stream holds only jobs not yet
-- acknowledged).
-- KEYS: the streams. ARGV: the consumer group, then for each stream in turn: how many of its jobs, then their ids.
-- Returns: {how many jobs were acknowledged} (every script answers a list).
local group, at, acked = ARGV[1], 2, 0
for k = 1, #KEYS do
  local n = tonumber(ARGV[at])
  for first = 1, n, 1000 do -- unpack has a bound: a thousand ids per call
    local ids = {}
    for j = first, math.min(n, first + 999) do
      ids[#ids + 1] = ARGV[at + j]
    end
    acked = acked + redis.call('XACK', KEYS[k], group, unpack(ids))
    redis.call('XDEL', KEYS[k], unpack(ids))
  end
  at = at + n + 1
end
return {acked}
