-- End the trust grants an older hitl kept for one session (naming no requester): each audited as ended on the
-- events chain, then the session's grants removed, in one step, so an upgrade run again after a crash audits none
-- twice and loses none. KEYS[1] the events stream, KEYS[2] the session's grants (the older hash), KEYS[3] the older
-- set of sessions; ARGV[1] the session id, ARGV[2..] one audit entry's JSON per grant, as read before.
--#include events_chain
local ended = 0
if redis.call('EXISTS', KEYS[2]) == 1 then
  for i = 2, #ARGV do
    events_push(KEYS[1], ARGV[i])
    ended = ended + 1
  end
  redis.call('DEL', KEYS[2])
end
redis.call('SREM', KEYS[3], ARGV[1])
return {ended}
