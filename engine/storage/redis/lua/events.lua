-- Append an audit entry that belongs to no approval to the events chain (a stream). KEYS[1] stream,
-- ARGV[1] the entry's JSON. Same link rule as the approval chains.
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local prev = ''
if last[1] then
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'e' then prev = string.match(fields[i + 1], '"link":"(%x+)"}$') or '' end
  end
end
local body = ARGV[1]
local link = redis.sha1hex(prev .. '\n' .. body)
redis.call('XADD', KEYS[1], '*', 'e', string.sub(body, 1, -2) .. ',"prev":"' .. prev .. '","link":"' .. link .. '"}')
return {1}
