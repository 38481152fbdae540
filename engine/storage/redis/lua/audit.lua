-- Append an audit entry written outside the approval scripts to its approval's chain (its link covers the
-- previous link and its own text). KEYS[1] audit list, ARGV[1] the entry's JSON.
local function chain_push(key, body)
  local last = redis.call('LINDEX', key, -1)
  local prev = ''
  if last then prev = string.match(last, '"link":"(%x+)"}$') or '' end
  local link = redis.sha1hex(prev .. '\n' .. body)
  redis.call('RPUSH', key, string.sub(body, 1, -2) .. ',"prev":"' .. prev .. '","link":"' .. link .. '"}')
end
chain_push(KEYS[1], ARGV[1])
return {1}
