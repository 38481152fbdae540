"""Metric counts in Redis: a hash per hour (``<prefix>:tally:<hour>``), one field per tool, tier and count, kept
:data:`~hitl.engine.domain.retention.TALLY_KEEP` (the key's TTL)."""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from typing import Any

from hitl.engine.domain.retention import TALLY_KEEP
from hitl.engine.domain.tally import TallyKey, hour_of
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.connection import RedisConnection, in_memory
from hitl.engine.storage.redis.part import RedisPart
from hitl.engine.storage.tally_buffer import TallyBuffer

__all__ = ["RedisTallies"]

_SEP = "\x1f"


class RedisTallies(RedisPart):
    """:class:`hitl.engine.ports.Tallies` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__(conn)
        self.buffer = TallyBuffer(self.write)

    def _key(self, hour: int) -> str:
        return f"{self.conn.p}:tally:{hour}"

    @in_memory  # held in the buffer; when it writes, it writes through the guarded `write`
    def add(self, counts: Mapping[TallyKey, float], *, now: float) -> Coroutine[Any, Any, None]:
        return self.buffer.add(counts, now=now)  # the buffer's own coroutine: every allowed call passes here

    async def flush(self) -> None:
        await self.buffer.flush()

    async def write(self, counts: dict[TallyKey, float]) -> None:
        """Add summed counts to their hours' hashes (what the buffer hands over)."""
        pipe = self.conn.r.pipeline(transaction=False)
        hours = set()
        for (hour, tool, tier, name), value in counts.items():
            pipe.hincrbyfloat(self._key(hour), _SEP.join((tool, tier, name)), value)
            hours.add(hour)
        for hour in hours:
            pipe.expire(self._key(hour), int(TALLY_KEEP))
        await pipe.execute()

    async def read(self, *, since: float, now: float) -> dict[tuple[str, str, str], float]:
        pipe = self.conn.r.pipeline(transaction=False)
        for hour in range(hour_of(since), hour_of(now) + 1):
            pipe.hgetall(self._key(hour))
        out: dict[tuple[str, str, str], float] = {}
        for found in await pipe.execute():
            for field, value in found.items():
                tool, tier, name = text(field).split(_SEP)
                out[(tool, tier, name)] = out.get((tool, tier, name), 0.0) + float(text(value))
        return out
