-- Claim execution under an idempotency key. Mirrors engine/domain/execution.py:next_claim.
-- KEYS[1] claim hash. ARGV: action_hash, holder, now, lease_until, retry_failed ('1'/'0')
--#include claims
return claim_next(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
