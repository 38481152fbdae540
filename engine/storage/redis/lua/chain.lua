-- chain_push(key, body): append an audit entry to its chain; its link covers the previous link and its own text.
-- The chain's head (entries, newest link) is written beside it (key .. ':head', same hash slot) in the same step,
-- so `hitl audit verify` notices a tail cut off the list.
-- Included where a script says `--#include chain` (Redis scripts cannot import; connection.py splices it in).
local function chain_push(key, body)
  local last = redis.call('LINDEX', key, -1)
  local prev = ''
  if last then prev = string.match(last, '"link":"(%x+)"}$') or '' end
  local link = redis.sha1hex(prev .. '\n' .. body)
  local n = redis.call('RPUSH', key, string.sub(body, 1, -2) .. ',"prev":"' .. prev .. '","link":"' .. link .. '"}')
  redis.call('HSET', key .. ':head', 'n', n, 'link', link)
end
