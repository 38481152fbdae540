-- Heads for chains written before hitl kept them (a store an older hitl wrote): set from the chain as it is, once,
-- and only where none exists. KEYS: pairs of (chain, its head key); ARGV[1] '1' when the first pair is the events
-- stream. Returns {how many heads it wrote}.
local wrote = 0
for i = 1, #KEYS, 2 do
  local chain, head = KEYS[i], KEYS[i + 1]
  if redis.call('EXISTS', head) == 0 then
    local last, n
    if i == 1 and ARGV[1] == '1' then
      n = redis.call('XLEN', chain)
      local newest = redis.call('XREVRANGE', chain, '+', '-', 'COUNT', 1)
      if newest[1] then
        local fields = newest[1][2]
        for j = 1, #fields, 2 do if fields[j] == 'e' then last = fields[j + 1] end end
      end
    else
      n = redis.call('LLEN', chain)
      last = redis.call('LINDEX', chain, -1)
    end
    if n > 0 and last then
      redis.call('HSET', head, 'n', n, 'link', string.match(last, '"link":"(%x+)"}$') or '')
      wrote = wrote + 1
    end
  end
end
return {wrote}
