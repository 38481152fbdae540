"""Holds on a kind of call in PostgreSQL: one row per key, shared by every replica."""

from __future__ import annotations

from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgHolds"]


class PgHolds:
    """:class:`hitl.engine.ports.CallHolds` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def hold(self, key: str, *, until: float) -> None:
        async def tx(c: Conn) -> None:
            await c.execute(
                "INSERT INTO call_holds (key, until) VALUES ($1, $2) "
                "ON CONFLICT (key) DO UPDATE SET until = greatest(call_holds.until, excluded.until)",
                key,
                until,
            )

        await self.db.run(tx)

    async def active(self, *, now: float) -> dict[str, float]:
        async def tx(c: Conn) -> dict[str, float]:
            rows = await c.fetch("SELECT key, until FROM call_holds WHERE until > $1", now)
            return {str(r[0]): float(r[1]) for r in rows}

        return await self.db.run(tx, write=False)
