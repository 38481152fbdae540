"""Run checkpoints in Redis, saved by compare-and-swap, with an index of paused runs."""

from __future__ import annotations

import json
from typing import Any

from hitl.engine.domain.execution import stale_run
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisRuns"]


class RedisRuns(RedisPart):
    """:class:`hitl.engine.ports.RunStore` on Redis."""

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        status = str(data.get("status", ""))
        args = [expected_version, json.dumps(data), repr(now), status, run_id]
        keys = [self.conn.run_key(run_id), self.conn.ended_key]
        out = [text(x) for x in await self.conn.call(self.conn.checkpoint_script, keys, args)]
        if out[0] != "ok":
            raise stale_run(run_id, int(out[1]), expected_version)
        # The paused-runs index changes only when a run pauses or continues: one more round trip then, not
        # on every step. It is read with verification, so a crash in between leaves nothing unrecoverable.
        was, now_paused = out[2] == "paused", status == "paused"
        if now_paused and not was:
            await self.conn.r.zadd(self.conn.paused_key, {run_id: 0})  # one score: paged in id order
        elif was and not now_paused:
            await self.conn.r.zrem(self.conn.paused_key, run_id)
        return int(out[1])

    async def load(self, run_id: str) -> StoredRun | None:
        data, version = await self.conn.r.hmget(self.conn.run_key(run_id), ["data", "version"])
        return StoredRun(json.loads(data), int(text(version))) if data is not None else None

    async def paused(self, *, limit: int = 500, after: str | None = None) -> list[str]:
        low = f"({after}" if after else "-"
        return [text(x) for x in await self.conn.r.zrangebylex(self.conn.paused_key, low, "+", start=0, num=limit)]

    async def _own(self, op: str, run_id: str, holder: str, now: float, lease: float) -> bool:
        args = [op, holder, repr(now), repr(now + lease)]
        out = await self.conn.call(self.conn.own_script, [self.conn.run_key(run_id)], args)
        return text(out[0]) == "1"

    async def own(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        # Indexed (if it is not yet) before the lease is written: a crash in between leaves an index entry the scan
        # verifies, never an owned run that no scan can find. The score becomes the real lease only on success, so
        # a refused attempt cannot push a dying owner's orphan out of reach.
        await self.conn.r.zadd(self.conn.running_key, {run_id: now}, nx=True)
        return await self._indexed(await self._own("own", run_id, holder, now, lease), run_id, now + lease)

    async def renew(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        return await self._indexed(await self._own("renew", run_id, holder, now, lease), run_id, now + lease)

    async def _indexed(self, ok: bool, run_id: str, until: float) -> bool:
        if ok:
            await self.conn.r.zadd(self.conn.running_key, {run_id: until})
        return ok

    async def release(self, run_id: str, *, holder: str) -> None:
        await self._own("release", run_id, holder, 0.0, 0.0)
        # Due at once: the next scan drops it (paused, ended) or, if it is still running, finds an orphan.
        await self.conn.r.zadd(self.conn.running_key, {run_id: 0}, xx=True)

    async def orphaned(self, *, now: float, limit: int = 100) -> list[str]:
        candidates = [
            text(x) for x in await self.conn.r.zrangebyscore(self.conn.running_key, "-inf", now, start=0, num=limit * 4)
        ]
        if not candidates:
            return []
        async with self.conn.r.pipeline(transaction=False) as pipe:
            for run_id in candidates:
                pipe.hmget(self.conn.run_key(run_id), ["status", "holder", "lease_until"])
            rows = await pipe.execute()
        out: list[str] = []
        done: list[str] = []
        live: dict[str, float] = {}
        for run_id, (status, holder, lease_until) in zip(candidates, rows, strict=True):
            status = text(status)
            if status not in ("running", ""):
                done.append(run_id)  # paused or ended: not driven, not an orphan
            elif holder and float(text(lease_until) or 0) > now:
                live[run_id] = float(text(lease_until))  # renewed since it was indexed: repair the score
            elif status == "running" and len(out) < limit:
                out.append(run_id)
        if done:
            await self.conn.r.zrem(self.conn.running_key, *done)
        if live:
            await self.conn.r.zadd(self.conn.running_key, live)
        return out
