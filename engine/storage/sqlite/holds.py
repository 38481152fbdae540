"""Holds on a kind of call in SQLite: one row per key, shared by every process on the file."""

from __future__ import annotations

import sqlite3

from hitl.engine.storage.sqlite.connection import SqliteConnection

__all__ = ["SqliteHolds"]


class SqliteHolds:
    """:class:`hitl.engine.ports.CallHolds` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def hold(self, key: str, *, until: float) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO call_holds (key, until) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET until = max(until, excluded.until)",
                (key, until),
            )

        await self.db.run(tx)

    async def active(self, *, now: float) -> dict[str, float]:
        def tx(c: sqlite3.Connection) -> dict[str, float]:
            return {str(k): float(u) for k, u in c.execute("SELECT key, until FROM call_holds WHERE until > ?", (now,))}

        return await self.db.run(tx, write=False)
