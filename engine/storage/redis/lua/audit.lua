-- Append an audit entry written outside the approval scripts to its approval's chain (its link covers the
-- previous link and its own text). KEYS[1] audit list, ARGV[1] the entry's JSON.
--#include chain
chain_push(KEYS[1], ARGV[1])
return {1}
