"""Rolling windows in SQLite (velocity and rolling-sum rules)."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.policy import WindowStats
from hitl.engine.storage.sqlite.connection import SqliteConnection

__all__ = ["SqliteWindows"]


class SqliteWindows:
    """:class:`hitl.engine.ports.RateWindows` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        def tx(c: sqlite3.Connection) -> WindowStats:
            c.execute("DELETE FROM windows WHERE key = ? AND at <= ?", (key, now - window))
            row = c.execute(
                "SELECT prior_count, prior_total FROM windows WHERE key = ? AND event_id = ?", (key, event_id)
            ).fetchone()
            if row is not None and row[0] is not None:  # counted before: as it was then
                return WindowStats(count=int(row[0]), total=float(row[1]), added=False)
            stats = _stats(c, key, now, window, exclude=event_id)
            if row is not None:  # counted by an older hitl, which kept no prior stats: as the window stands
                return WindowStats(count=stats.count, total=stats.total, added=False)
            c.execute(
                "INSERT INTO windows (key, event_id, at, amount, prior_count, prior_total) VALUES (?, ?, ?, ?, ?, ?)",
                (key, event_id, now, amount, stats.count, stats.total),
            )
            return stats

        return await self.db.run(tx)

    async def stats(self, key: str, *, now: float, window: float, exclude: str = "") -> WindowStats:
        return await self.db.run(lambda c: _stats(c, key, now, window, exclude), write=False)

    async def forget(self, key: str, *, event_id: str) -> None:
        await self.db.run(lambda c: c.execute("DELETE FROM windows WHERE key = ? AND event_id = ?", (key, event_id)))


def _stats(c: sqlite3.Connection, key: str, now: float, window: float, exclude: str = "") -> WindowStats:
    # The event itself never counts toward its own prior stats (re-asking is not double counted).
    row = c.execute(
        "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM windows WHERE key = ? AND at > ? AND event_id != ?",
        (key, now - window, exclude),
    ).fetchone()
    return WindowStats(count=int(row[0]), total=float(row[1]))
