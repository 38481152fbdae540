-- Take jobs of one kind for a consumer, in one step: first, when asked, the jobs a crashed consumer left unacknowledged
-- past their lease, then new ones, up to the limit.
-- KEYS[1]: the kind's stream. ARGV: the consumer group, the consumer, the limit, and the idle time in ms after which a
-- job is taken over ('' = do not look for those now).
-- Returns: id, payload, id, payload... (a job deleted while it was held is left out).
local group, consumer, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out, seen = {}, 0
local function take(entries)
  for _, entry in ipairs(entries) do
    seen = seen + 1
    local fields = entry[2]
    if type(fields) == 'table' then
      for i = 1, #fields, 2 do
        if fields[i] == 'payload' then
          out[#out + 1] = entry[1]
          out[#out + 1] = fields[i + 1]
          break
        end
      end
    end
  end
end
if ARGV[4] ~= '' then
  take(redis.call('XAUTOCLAIM', KEYS[1], group, consumer, ARGV[4], '0-0', 'COUNT', limit)[2])
end
if seen < limit then
  local fresh = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', limit - seen, 'STREAMS', KEYS[1], '>')
  if fresh then
    take(fresh[1][2])
  end
end
return out
