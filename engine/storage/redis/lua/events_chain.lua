-- events_push(key, body): append an audit entry that belongs to no approval to the events chain (a stream),
-- with the same link rule as the approval chains, and its head (key .. ':head') in the same step.
local function events_push(key, body)
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  local prev = ''
  if last[1] then
    local fields = last[1][2]
    for i = 1, #fields, 2 do
      if fields[i] == 'e' then prev = string.match(fields[i + 1], '"link":"(%x+)"}$') or '' end
    end
  end
  local link = redis.sha1hex(prev .. '\n' .. body)
  redis.call('XADD', key, '*', 'e', string.sub(body, 1, -2) .. ',"prev":"' .. prev .. '","link":"' .. link .. '"}')
  redis.call('HINCRBY', key .. ':head', 'n', 1)
  redis.call('HSET', key .. ':head', 'link', link)
end
