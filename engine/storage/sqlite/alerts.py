"""Each alert's state in SQLite: a table of its own, saved by compare-and-swap."""

from __future__ import annotations

import sqlite3
from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.codec import dumps, loads
from hitl.engine.storage.sqlite.connection import SqliteConnection

__all__ = ["SqliteAlerts"]


class SqliteAlerts:
    """:class:`hitl.engine.ports.AlertStates` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def load(self, name: str) -> StoredRun | None:
        def tx(c: sqlite3.Connection) -> StoredRun | None:
            row = c.execute("SELECT data, version FROM alert_states WHERE name = ?", (name,)).fetchone()
            return StoredRun(loads(row[0]), int(row[1])) if row else None

        return await self.db.run(tx, write=False)

    async def save(self, name: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            row = c.execute("SELECT version FROM alert_states WHERE name = ?", (name,)).fetchone()
            claim_rules.check_checkpoint_version(f"alert {name}", row[0] if row else 0, expected_version)
            c.execute(
                "INSERT INTO alert_states (name, version, data, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) "
                "DO UPDATE SET version = excluded.version, data = excluded.data, updated_at = excluded.updated_at",
                (name, expected_version + 1, dumps(data), now),
            )
            return expected_version + 1

        return await self.db.run(tx)
