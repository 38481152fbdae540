"""Redis store: the shared production store for several bot replicas.

Each decision is one ``EVALSHA`` (one round trip). Per-approval keys share a hash tag
(``{prefix}:{apr_x}`` and ``{prefix}:{apr_x}:audit``) so a Redis Cluster can hold them; the scripts only
touch keys of one slot. Secondary indexes (pending by role, due-for-expiry) are sorted sets written
*before* the approval in the same pipeline and repaired lazily on read, so an index entry can be
stale but an approval can never be missing from its index.
"""

from __future__ import annotations

from engine.storage.redis_approvals import RedisApprovals
from engine.storage.redis_base import connect
from engine.storage.redis_records import RedisRecords
from engine.storage.redis_runs import RedisRuns

__all__ = ["RedisStore", "connect"]


class RedisStore(RedisApprovals, RedisRuns, RedisRecords):
    """Redis implementation of :class:`engine.ports.Store`.

    Args:
        client: an injected ``redis.asyncio.Redis`` (the caller owns pooling and TLS settings).
        prefix: key prefix, so several deployments or tests share one server.
    """
