"""Durable jobs in PostgreSQL: a table; a claimed job whose consumer went quiet past its lease is taken over."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.records import Job
from hitl.engine.storage.codec import loads
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_job, rows_touched

__all__ = ["PgJobs"]


class PgJobs:
    """:class:`hitl.engine.ports.JobQueue` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def enqueue(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        return await self.db.run(lambda c: insert_job(c, kind, payload, now))

    async def claim(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        async def tx(c: Conn) -> list[Job]:
            rows = await c.fetch(
                "UPDATE jobs SET consumer = $1, claimed_at = $2, attempts = attempts + 1 WHERE id IN ("
                "SELECT id FROM jobs WHERE NOT done AND kind = $3 AND (consumer IS NULL OR claimed_at + $4 <= $2) "
                "ORDER BY id LIMIT $5) RETURNING id, kind, payload, attempts",
                consumer,
                now,
                kind,
                lease,
                limit,
            )
            jobs = [Job(id=str(r[0]), kind=r[1], payload=loads(r[2]), attempts=r[3]) for r in rows]
            return sorted(jobs, key=lambda j: int(j.id))

        return await self.db.run(tx)

    async def ack(self, *job_ids: str) -> None:
        if not job_ids:
            return

        async def tx(c: Conn) -> None:
            # One statement per job, by its key (asyncpg sends them together): a lookup by ``=`` locks the rows it
            # reads, where ``= ANY`` may scan pages and collide with a neighbouring claim under SERIALIZABLE.
            await c.executemany("UPDATE jobs SET done = true WHERE id = $1", [(int(j),) for j in job_ids])

        await self.db.run(tx)

    async def settle(self, kind: str, *, approval_id: str) -> int:
        async def tx(c: Conn) -> int:
            done = await c.execute(
                "UPDATE jobs SET done = true WHERE NOT done AND kind = $1 AND approval_id = $2", kind, approval_id
            )
            return rows_touched(done)

        return await self.db.run(tx)
