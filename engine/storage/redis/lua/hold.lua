-- A hold on a kind of call: kept until its end, a later hold already kept standing.
-- KEYS[1] the holds (a hash: key -> until, epoch seconds). ARGV[1] the key, ARGV[2] until.
-- Returns {1} when this hold is the one kept, {0} when a later one stands.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current and tonumber(current) >= tonumber(ARGV[2]) then
    return {0}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1}
