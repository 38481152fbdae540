"""Durable jobs in SQLite: a table; a claimed job whose consumer went quiet past its lease is taken over."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.domain.records import Job
from hitl.engine.storage.codec import loads
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_job

__all__ = ["SqliteJobs"]


class SqliteJobs:
    """:class:`hitl.engine.ports.JobQueue` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def enqueue(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        return await self.db.run(lambda c: insert_job(c, kind, payload, now))

    async def claim(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        def tx(c: sqlite3.Connection) -> list[Job]:
            rows = c.execute(
                "SELECT id, kind, payload, attempts FROM jobs WHERE done = 0 AND kind = ? AND (consumer IS NULL OR "
                "claimed_at + ? <= ?) ORDER BY id LIMIT ?",
                (kind, lease, now, limit),
            ).fetchall()
            for row in rows:
                c.execute(
                    "UPDATE jobs SET consumer = ?, claimed_at = ?, attempts = attempts + 1 WHERE id = ?",
                    (consumer, now, row[0]),
                )
            return [Job(id=str(r[0]), kind=r[1], payload=loads(r[2]), attempts=r[3] + 1) for r in rows]

        return await self.db.run(tx)

    async def ack(self, *job_ids: str) -> None:
        if not job_ids:
            return

        def tx(c: sqlite3.Connection) -> None:
            c.executemany("UPDATE jobs SET done = 1 WHERE id = ?", [(int(j),) for j in job_ids])

        await self.db.run(tx)

    async def settle(self, kind: str, *, approval_id: str) -> int:
        def tx(c: sqlite3.Connection) -> int:
            # Open jobs of one kind only (the jobs_open index): the ones still waiting are few.
            cur = c.execute(
                "UPDATE jobs SET done = 1 WHERE id IN (SELECT id FROM jobs WHERE done = 0 AND kind = ? "
                "AND json_extract(payload, '$.approval_id') = ?)",
                (kind, approval_id),
            )
            return cur.rowcount

        return await self.db.run(tx)
