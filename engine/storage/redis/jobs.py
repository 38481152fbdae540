"""Durable jobs in Redis: a stream per kind with a consumer group; a crashed consumer's jobs are reclaimed
(XAUTOCLAIM)."""

from __future__ import annotations

import json
from typing import Any, cast

from redis.exceptions import ResponseError

from hitl.engine.domain.records import Job
from hitl.engine.errors import StoreError
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.connection import RedisConnection
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisJobs"]

_GROUP = "hitl-workers"


class RedisJobs(RedisPart):
    """:class:`hitl.engine.ports.JobQueue` on Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__(conn)
        self._groups: set[str] = set()
        """Kinds whose consumer group this process made or found (made once, not on every claim)."""
        self._reclaimed: dict[str, float] = {}
        """Per kind, the ``now`` of the last look for jobs a crashed consumer left."""

    def _key(self, kind: str) -> str:
        return self.conn.jobs_key(kind)

    async def enqueue(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        job_id = await self.r.xadd(self._key(kind), {"payload": json.dumps(payload), "at": repr(now)})
        return f"{kind}/{text(job_id)}"

    async def claim(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        try:
            return await self._claim(consumer, kind, limit, now, lease)
        except StoreError as exc:
            if not isinstance(exc.__cause__, ResponseError) or "NOGROUP" not in str(exc.__cause__):
                raise
            self._groups.discard(kind)  # the stream went away since: make the group again, once
            return await self._claim(consumer, kind, limit, now, lease)

    async def _claim(self, consumer: str, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        key = self._key(kind)
        if kind not in self._groups:
            try:
                await self.r.xgroup_create(key, _GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
            self._groups.add(kind)
        last = self._reclaimed.get(kind)
        idle = ""
        if last is None or not last <= now < last + lease / 4:
            # Jobs a crashed consumer held are taken over at most a quarter lease after their lease ran out: a
            # claim looks for them then, not on every call (a busy queue is claimed from hundreds of times a
            # second). Idle time is the server's clock: ``lease`` is how long a job may stay unacknowledged.
            self._reclaimed[kind] = now
            idle = str(int(lease * 1000))
        conn = self.conn
        out = await conn.call(conn.take_jobs_script, [key], [_GROUP, consumer, str(limit), idle])  # one step
        return [
            Job(id=f"{kind}/{text(job_id)}", kind=kind, payload=json.loads(payload))
            for job_id, payload in zip(out[::2], out[1::2], strict=True)
        ]

    async def ack(self, *job_ids: str) -> None:
        by_kind: dict[str, list[str]] = {}
        for job_id in job_ids:
            kind, _, xid = job_id.partition("/")
            by_kind.setdefault(kind, []).append(xid)
        if not by_kind:
            return
        args: list[str] = [_GROUP]
        for xids in by_kind.values():
            args += [str(len(xids)), *xids]
        await self.conn.call(self.conn.ack_script, [self._key(kind) for kind in by_kind], args)  # one step

    async def settle(self, kind: str, *, approval_id: str) -> int:
        # The stream holds only jobs not yet acknowledged (an acknowledged one is deleted): few to read.
        key = self._key(kind)
        settled = 0
        start = "-"
        while True:
            entries = cast(list[Any], await self.r.xrange(key, min=start, max="+", count=500) or [])
            for xid, fields in entries:
                f = {text(k): text(v) for k, v in (fields or {}).items()}
                if json.loads(f.get("payload") or "{}").get("approval_id") == approval_id:
                    await self.ack(f"{kind}/{text(xid)}")
                    settled += 1
            if len(entries) < 500:
                return settled
            start = "(" + text(entries[-1][0])
