"""Runs in SQLite: execution claims, checkpoints, paused runs and durable jobs."""

from __future__ import annotations

import sqlite3
from typing import Any

from engine.domain import execution as claim_rules
from engine.domain.records import Claim, Job
from engine.storage._codec import dumps, loads
from engine.storage.sqlite_base import SqliteBase, _get_claim, _put_claim

__all__ = ["SqliteRuns"]


class SqliteRuns(SqliteBase):
    # -- execution claims -----------------------------------------------------------------------------
    async def claim(
        self, key: str, *, action_hash: str, holder: str, now: float, lease: float, retry_failed: bool = False
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            existing = _get_claim(c, key)
            out = claim_rules.next_claim(
                existing,
                key=key,
                action_hash=action_hash,
                holder=holder,
                now=now,
                lease=lease,
                retry_failed=retry_failed,
            )
            if out.acquired:
                _put_claim(c, out)
            return out

        return await self._run(tx)

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        def tx(c: sqlite3.Connection) -> Claim:
            out = claim_rules.finished(
                _get_claim(c, key), key=key, holder=holder, attempt=attempt, ok=ok, result=result
            )
            _put_claim(c, out)
            return out

        return await self._run(tx)

    async def get_claim(self, key: str) -> Claim | None:
        return await self._run(lambda c: _get_claim(c, key), write=False)

    # -- checkpoints ----------------------------------------------------------------------------------
    async def save_checkpoint(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            claim_rules.check_checkpoint_version(run_id, row[0] if row else 0, expected_version)
            c.execute(
                "INSERT INTO checkpoints (run_id, version, data, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
                "updated_at = excluded.updated_at",
                (run_id, expected_version + 1, dumps(data), now),
            )
            return expected_version + 1

        return await self._run(tx)

    async def paused_runs(self, *, limit: int = 500) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT run_id FROM checkpoints WHERE json_extract(data, '$.status') = 'paused' "
                "ORDER BY updated_at LIMIT ?",
                (limit,),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self._run(tx, write=False)

    async def load_checkpoint(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        def tx(c: sqlite3.Connection) -> tuple[dict[str, Any], int] | None:
            row = c.execute("SELECT data, version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            return (loads(row[0]), int(row[1])) if row else None

        return await self._run(tx, write=False)

    async def enqueue_job(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        def tx(c: sqlite3.Connection) -> str:
            cur = c.execute(
                "INSERT INTO jobs (kind, payload, created_at) VALUES (?, ?, ?)", (kind, dumps(payload), now)
            )
            return str(cur.lastrowid)

        return await self._run(tx)

    async def claim_jobs(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
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

        return await self._run(tx)

    async def ack_job(self, job_id: str) -> None:
        await self._run(lambda c: c.execute("UPDATE jobs SET done = 1 WHERE id = ?", (int(job_id),)) and None)
