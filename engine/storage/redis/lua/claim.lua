-- Claim execution under an idempotency key. Mirrors engine/domain/execution.py:next_claim.
-- KEYS[1] claim hash; KEYS[2], when a receipt is issued with the claim: the receipt's record; KEYS[3] and KEYS[4],
-- when that receipt is an approved action's: its approval's withdrawal record and audit chain.
-- ARGV: action_hash, holder, now, lease_until, retry_failed ('1'/'0'); with a receipt also: the claim's key, the
-- receipt's exp, and how many milliseconds its record is kept (to its exp and the leeway); with an approval's
-- receipt also: the audit entry of its issue.
-- A withdrawn approval refuses the claim before anything is written. A claim acquired for a new attempt (not
-- recovered from a holder that died) records the receipt, and appends its audit entry, in this step.
--#include chain
--#include claims
if KEYS[3] and redis.call('HGET', KEYS[3], 'state') == 'withdrawn' then return {'withdrawn'} end
local out = claim_next(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if KEYS[2] then receipt_issued(KEYS[2], out, {ARGV[6], ARGV[7], ARGV[8]}) end
if KEYS[4] and out[1] == 'acquired' and out[3] == '0' then chain_push(KEYS[4], ARGV[9]) end
return out
