"""Run checkpoints in SQLite, saved by compare-and-swap."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.codec import dumps, loads
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import own_run

__all__ = ["SqliteRuns"]


class SqliteRuns:
    """:class:`hitl.engine.ports.RunStore` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            claim_rules.check_checkpoint_version(run_id, row[0] if row else 0, expected_version)
            c.execute(
                "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
                "updated_at = excluded.updated_at, status = excluded.status",
                (run_id, expected_version + 1, dumps(data), now, str(data.get("status", ""))),
            )
            return expected_version + 1

        return await self.db.run(tx)

    async def load(self, run_id: str) -> StoredRun | None:
        def tx(c: sqlite3.Connection) -> StoredRun | None:
            row = c.execute("SELECT data, version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            return StoredRun(loads(row[0]), int(row[1])) if row else None

        return await self.db.run(tx, write=False)

    async def paused(self, *, limit: int = 500, after: str | None = None) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT run_id FROM checkpoints WHERE status = 'paused' AND run_id > ? ORDER BY run_id LIMIT ?",
                (after or "", limit),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)

    async def own(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        return await self.db.run(lambda c: own_run(c, run_id, holder, now, lease) is None)

    async def renew(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "UPDATE run_owners SET lease_until = ? WHERE run_id = ? AND holder = ?", (now + lease, run_id, holder)
            ).rowcount
            return bool(n)

        return await self.db.run(tx)

    async def release(self, run_id: str, *, holder: str) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM run_owners WHERE run_id = ? AND holder = ?", (run_id, holder))

        await self.db.run(tx)

    async def orphaned(self, *, now: float, limit: int = 100) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT c.run_id FROM checkpoints c LEFT JOIN run_owners o ON o.run_id = c.run_id "
                "WHERE c.status = 'running' AND (o.lease_until IS NULL OR o.lease_until <= ?) "
                "ORDER BY COALESCE(o.lease_until, c.updated_at), c.run_id LIMIT ?",
                (now, limit),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
