"""Run checkpoints in Redis, saved by compare-and-swap, with an index of paused runs."""

from __future__ import annotations

import json
from typing import Any

from engine.domain.execution import stale_run
from engine.storage.redis.codec import text
from engine.storage.redis.connection import RedisConnection, store_errors

__all__ = ["RedisRuns"]


@store_errors
class RedisRuns:
    """:class:`engine.ports.RunStore` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self._paused = f"{conn.p}:paused-runs"

    def _key(self, run_id: str) -> str:
        return f"{self.conn.p}:run:{{{run_id}}}"

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        status = str(data.get("status", ""))
        args = [expected_version, json.dumps(data), repr(now), status]
        out = [text(x) for x in await self.conn.call(self.conn.checkpoint_script, [self._key(run_id)], args)]
        if out[0] != "ok":
            raise stale_run(run_id, int(out[1]), expected_version)
        # The paused-runs index changes only when a run pauses or continues: one more round trip then, not
        # on every step. It is read with verification, so a crash in between leaves nothing unrecoverable.
        was, now_paused = out[2] == "paused", status == "paused"
        if now_paused and not was:
            await self.conn.r.zadd(self._paused, {run_id: now})
        elif was and not now_paused:
            await self.conn.r.zrem(self._paused, run_id)
        return int(out[1])

    async def load(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        data, version = await self.conn.r.hmget(self._key(run_id), ["data", "version"])
        return (json.loads(data), int(text(version))) if data is not None else None

    async def paused(self, *, limit: int = 500) -> list[str]:
        return [text(x) for x in await self.conn.r.zrange(self._paused, 0, limit - 1)]
