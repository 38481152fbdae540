"""Redis store: the shared production store for several bot replicas.

Each decision is one ``EVALSHA`` (one round trip). Per-approval keys share a hash tag
(``{prefix}:{apr_x}`` and ``{prefix}:{apr_x}:audit``) so a Redis Cluster can hold them; the scripts only
touch keys of one slot. Secondary indexes (pending by role, due-for-expiry) are sorted sets written
*before* the approval in the same pipeline and repaired lazily on read, so an index entry can be
stale but an approval can never be missing from its index.
"""

from __future__ import annotations

from hitl.engine.storage.redis.connection import connect
from hitl.engine.storage.redis.store import RedisStore

__all__ = ["RedisStore", "connect"]
