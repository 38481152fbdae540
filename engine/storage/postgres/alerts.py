"""Each alert's state in PostgreSQL: a table of its own, saved by compare-and-swap."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.codec import dumps, loads
from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgAlerts"]


class PgAlerts:
    """:class:`hitl.engine.ports.AlertStates` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def load(self, name: str) -> StoredRun | None:
        async def tx(c: Conn) -> StoredRun | None:
            row = await c.fetchrow("SELECT data, version FROM alert_states WHERE name = $1", name)
            return StoredRun(loads(row[0]), int(row[1])) if row else None

        return await self.db.run(tx, write=False)

    async def save(self, name: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        async def tx(c: Conn) -> int:
            row = await c.fetchrow("SELECT version FROM alert_states WHERE name = $1", name)
            claim_rules.check_checkpoint_version(f"alert {name}", row[0] if row else 0, expected_version)
            await c.execute(
                "INSERT INTO alert_states (name, version, data, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT "
                "(name) DO UPDATE SET version = excluded.version, data = excluded.data, "
                "updated_at = excluded.updated_at",
                name,
                expected_version + 1,
                dumps(data),
                now,
            )
            return expected_version + 1

        return await self.db.run(tx)
