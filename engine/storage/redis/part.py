"""What every part of the Redis store is: a piece of the store (approvals, runs, trust, ...) over the one
:class:`RedisConnection` they all share, behind the store's one error boundary."""

from __future__ import annotations

from typing import Any

from hitl.engine.storage.redis.connection import RedisConnection, store_errors

__all__ = ["RedisPart"]


class RedisPart:
    """A part of the Redis store over one connection: ``conn`` (key layout, scripts, deadline) and its client ``r``.

    Every public coroutine of a subclass is guarded by :func:`store_errors` when the subclass is made, so a new
    part cannot forget the boundary that turns a Redis failure or an overrun deadline into a :class:`StoreError`.
    """

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.r = conn.r

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        store_errors(cls)
