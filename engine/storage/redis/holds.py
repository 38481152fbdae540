"""Holds on a kind of call in Redis: one hash (key -> until), each hold kept by a script (the later stands)."""

from __future__ import annotations

from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisHolds"]


class RedisHolds(RedisPart):
    """:class:`hitl.engine.ports.CallHolds` on Redis."""

    async def hold(self, key: str, *, until: float) -> None:
        await self.conn.call(self.conn.hold_script, [self.conn.holds_key], [key, repr(until)])

    async def active(self, *, now: float) -> dict[str, float]:
        raw = await self.r.hgetall(self.conn.holds_key)
        holds = {text(k): float(text(v)) for k, v in raw.items()}
        ended = [k for k, until in holds.items() if until <= now]
        if ended:  # a hold is short (seconds): ended ones are dropped as they are seen
            await self.r.hdel(self.conn.holds_key, *ended)
        return {k: until for k, until in holds.items() if until > now}
