"""Run checkpoints in SQLite, saved by compare-and-swap."""

from __future__ import annotations

import sqlite3
from typing import Any

from engine.domain import execution as claim_rules
from engine.storage.codec import dumps, loads
from engine.storage.sqlite.connection import SqliteConnection

__all__ = ["SqliteRuns"]


class SqliteRuns:
    """:class:`engine.ports.RunStore` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
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

        return await self.db.run(tx)

    async def load(self, run_id: str) -> tuple[dict[str, Any], int] | None:
        def tx(c: sqlite3.Connection) -> tuple[dict[str, Any], int] | None:
            row = c.execute("SELECT data, version FROM checkpoints WHERE run_id = ?", (run_id,)).fetchone()
            return (loads(row[0]), int(row[1])) if row else None

        return await self.db.run(tx, write=False)

    async def paused(self, *, limit: int = 500) -> list[str]:
        def tx(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "SELECT run_id FROM checkpoints WHERE json_extract(data, '$.status') = 'paused' "
                "ORDER BY updated_at LIMIT ?",
                (limit,),
            ).fetchall()
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
