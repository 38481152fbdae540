-- Claim execution under an idempotency key. Mirrors engine/domain/execution.py:next_claim.
-- KEYS[1] claim hash; KEYS[2], when a receipt is issued with the claim: the receipt's record.
-- ARGV: action_hash, holder, now, lease_until, retry_failed ('1'/'0'); with a receipt also: the claim's key, the
-- receipt's exp, and how many milliseconds its record is kept (to its exp and the leeway).
-- A claim acquired for a new attempt (not recovered from a holder that died) records the receipt in this step.
--#include claims
local out = claim_next(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if KEYS[2] then receipt_issued(KEYS[2], out, {ARGV[6], ARGV[7], ARGV[8]}) end
return out
