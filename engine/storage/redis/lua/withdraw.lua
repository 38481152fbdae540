-- Withdraw an approval's receipts unless one was spent first. Mirrors engine/storage/sqlite/receipts.py:withdraw.
-- KEYS[1] the approval's spending record (redeem.lua's KEYS[2]). ARGV[1] now.
-- Returns {'withdrawn'}, {'already'} (withdrawn before) or {'spent'} (a receipt of it was spent first).
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'spent' then return {'spent'} end
if state == 'withdrawn' then return {'already'} end
redis.call('HSET', KEYS[1], 'state', 'withdrawn', 'at', ARGV[1])
return {'withdrawn'}
