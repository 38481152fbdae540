"""Rolling windows in PostgreSQL (velocity and rolling-sum rules)."""

from __future__ import annotations

from hitl.engine.domain.policy import WindowStats
from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgWindows"]


class PgWindows:
    """:class:`hitl.engine.ports.RateWindows` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        async def tx(c: Conn) -> WindowStats:
            await c.execute("DELETE FROM windows WHERE key = $1 AND at <= $2", key, now - window)
            row = await c.fetchrow(
                "SELECT prior_count, prior_total FROM windows WHERE key = $1 AND event_id = $2", key, event_id
            )
            if row is not None and row[0] is not None:  # counted before: as it was then
                return WindowStats(count=int(row[0]), total=float(row[1]), added=False)
            stats = await _stats(c, key, now, window, exclude=event_id)
            if row is not None:  # counted by an older hitl, which kept no prior stats: as the window stands
                return WindowStats(count=stats.count, total=stats.total, added=False)
            inserted = await c.execute(
                "INSERT INTO windows (key, event_id, at, amount, prior_count, prior_total) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                key,
                event_id,
                now,
                amount,
                stats.count,
                stats.total,
            )
            if inserted.endswith(" 0"):  # another transaction counted it first: it is that one's
                return WindowStats(count=stats.count, total=stats.total, added=False)
            return stats

        return await self.db.run(tx)

    async def stats(self, key: str, *, now: float, window: float, exclude: str = "") -> WindowStats:
        return await self.db.run(lambda c: _stats(c, key, now, window, exclude), write=False)

    async def forget(self, key: str, *, event_id: str) -> None:
        async def tx(c: Conn) -> None:
            await c.execute("DELETE FROM windows WHERE key = $1 AND event_id = $2", key, event_id)

        await self.db.run(tx)


async def _stats(c: Conn, key: str, now: float, window: float, exclude: str = "") -> WindowStats:
    # The event itself never counts toward its own prior stats (re-asking is not double counted).
    row = await c.fetchrow(
        "SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM windows WHERE key = $1 AND at > $2 AND event_id != $3",
        key,
        now - window,
        exclude,
    )
    assert row is not None  # an aggregate always has its one row
    return WindowStats(count=int(row[0]), total=float(row[1]))
