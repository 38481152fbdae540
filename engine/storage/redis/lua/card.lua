-- An approval's card: where its message was posted and the approval as it stands, read in one step (what a card
-- update needs, read only).
-- KEYS: the card's message hash, the approval's document, the approval's hash (one approval: one hash slot).
-- ARGV: the approval's changing fields, in the order the codec reads them.
-- Returns: {false} when no card was posted; else channel, ts, doc (false when the approval is gone), then the
-- changing fields.
local ref = redis.call('HMGET', KEYS[1], 'channel', 'ts')
if not ref[1] then
  return {false}
end
local out = {ref[1], ref[2], redis.call('GET', KEYS[2])}
local dynamic = redis.call('HMGET', KEYS[3], unpack(ARGV))
for i = 1, #ARGV do
  out[3 + i] = dynamic[i]
end
return out
