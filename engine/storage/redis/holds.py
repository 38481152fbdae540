"""Holds on a kind of call in Redis: one hash (key -> until), each hold kept by a script (the later stands)."""

from __future__ import annotations

from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.connection import RedisConnection, store_errors

__all__ = ["RedisHolds"]


@store_errors
class RedisHolds:
    """:class:`hitl.engine.ports.CallHolds` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.r = conn.r
        self._key = conn.holds_key

    async def hold(self, key: str, *, until: float) -> None:
        await self.conn.call(self.conn.hold_script, [self._key], [key, repr(until)])

    async def active(self, *, now: float) -> dict[str, float]:
        raw = await self.r.hgetall(self._key)
        holds = {text(k): float(text(v)) for k, v in raw.items()}
        ended = [k for k, until in holds.items() if until <= now]
        if ended:  # a hold is short (seconds): ended ones are dropped as they are seen
            await self.r.hdel(self._key, *ended)
        return {k: until for k, until in holds.items() if until > now}
