-- Spend a receipt once. Mirrors engine/storage/sqlite/receipts.py:redeem.
-- KEYS[1] the receipt's record, KEYS[2] its approval's spending record (whether a receipt of it was spent first or
-- it was withdrawn first: withdraw.lua writes it too, so the two never both win).
-- ARGV[1] the redemption id ('' for none), ARGV[2] now, ARGV[3] the leeway (s).
-- Returns {'first'}, {'again'} (spent before under the same redemption id), {'spent'}, {'withdrawn'} or {'unknown'}.
local f = redis.call('HMGET', KEYS[1], 'exp', 'redeemed', 'redemption')
if not f[1] or tonumber(f[1]) + tonumber(ARGV[3]) < tonumber(ARGV[2]) then return {'unknown'} end
if f[2] == '1' then
  if ARGV[1] ~= '' and f[3] == ARGV[1] then return {'again'} end
  return {'spent'}
end
if redis.call('HGET', KEYS[2], 'state') == 'withdrawn' then return {'withdrawn'} end
redis.call('HSETNX', KEYS[2], 'state', 'spent')
redis.call('HSETNX', KEYS[2], 'at', ARGV[2])
redis.call('HSET', KEYS[1], 'redeemed', '1', 'redemption', ARGV[1])
return {'first'}
