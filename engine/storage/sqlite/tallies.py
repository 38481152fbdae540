"""Metric counts in SQLite: one row per hour, tool, tier and field."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.tally import TallyKey, hour_of
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.tally_buffer import BufferedTallies

__all__ = ["SqliteTallies"]


class SqliteTallies(BufferedTallies[SqliteConnection]):
    """:class:`hitl.engine.ports.Tallies` on SQLite."""

    async def _write(self, counts: dict[TallyKey, float]) -> None:
        rows = [(hour, tool, tier, name, value) for (hour, tool, tier, name), value in counts.items()]

        def tx(c: sqlite3.Connection) -> None:
            c.executemany(
                "INSERT INTO tallies (hour, tool, tier, field, n) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (hour, tool, tier, field) DO UPDATE SET n = n + excluded.n",
                rows,
            )

        await self.db.run(tx)

    async def read(self, *, since: float, now: float) -> dict[tuple[str, str, str], float]:
        def q(c: sqlite3.Connection) -> dict[tuple[str, str, str], float]:
            found = c.execute(
                "SELECT tool, tier, field, SUM(n) FROM tallies WHERE hour BETWEEN ? AND ? GROUP BY tool, tier, field",
                (hour_of(since), hour_of(now)),
            ).fetchall()
            return {(str(t), str(r), str(f)): float(n) for t, r, f, n in found}

        return await self.db.run(q, write=False)
