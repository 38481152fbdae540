"""Rolling windows in Redis: a sorted set per subject, read and added to by one script."""

from __future__ import annotations

from hitl.engine.domain.policy import WindowStats
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisWindows"]


class RedisWindows(RedisPart):
    """:class:`hitl.engine.ports.RateWindows` on Redis."""

    def _keys(self, key: str) -> list[str]:
        return [self.conn.window_key(key), self.conn.window_priors_key(key)]

    async def add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        args = [repr(now), repr(now - window), f"{event_id}|{amount!r}", int(window) + 1, event_id]
        out = await self.conn.call(self.conn.window_script, self._keys(key), args)
        return WindowStats(count=int(text(out[0])), total=float(text(out[1])), added=text(out[2]) == "1")

    async def forget(self, key: str, *, event_id: str) -> None:
        await self.conn.call(self.conn.window_forget_script, self._keys(key), [event_id])

    async def stats(self, key: str, *, now: float, window: float, exclude: str = "") -> WindowStats:
        out = await self.conn.call(
            self.conn.window_script, self._keys(key), [repr(now), repr(now - window), "", 0, exclude]
        )
        return WindowStats(count=int(text(out[0])), total=float(text(out[1])))
