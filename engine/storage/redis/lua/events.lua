-- Append an audit entry that belongs to no approval to the events chain (a stream). KEYS[1] stream,
-- ARGV[1] the entry's JSON. Same link rule as the approval chains.
--#include events_chain
events_push(KEYS[1], ARGV[1])
return {1}
