"""Metric counts in PostgreSQL: one row per hour, tool, tier and field."""

from __future__ import annotations

from hitl.engine.domain.tally import TallyKey, hour_of
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.tally_buffer import BufferedTallies

__all__ = ["PgTallies"]


class PgTallies(BufferedTallies[PgConnection]):
    """:class:`hitl.engine.ports.Tallies` on PostgreSQL."""

    async def _write(self, counts: dict[TallyKey, float]) -> None:
        rows = [(hour, tool, tier, name, value) for (hour, tool, tier, name), value in sorted(counts.items())]

        async def tx(c: Conn) -> None:
            await c.executemany(
                "INSERT INTO tallies (hour, tool, tier, field, n) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (hour, tool, tier, field) DO UPDATE SET n = tallies.n + excluded.n",
                rows,
            )

        await self.db.run(tx)

    async def read(self, *, since: float, now: float) -> dict[tuple[str, str, str], float]:
        async def q(c: Conn) -> dict[tuple[str, str, str], float]:
            found = await c.fetch(
                "SELECT tool, tier, field, SUM(n) FROM tallies WHERE hour BETWEEN $1 AND $2 GROUP BY tool, tier, field",
                hour_of(since),
                hour_of(now),
            )
            return {(str(t), str(r), str(f)): float(n) for t, r, f, n in found}

        return await self.db.run(q, write=False)
