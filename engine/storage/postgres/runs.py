"""Run checkpoints in PostgreSQL, saved by compare-and-swap, and the leases that say who drives a run."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain import execution as claim_rules
from hitl.engine.domain.runs import StoredRun
from hitl.engine.storage.codec import dumps, loads
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.journal import own_run
from hitl.engine.storage.postgres.rows import rows_touched

__all__ = ["PgRuns"]


class PgRuns:
    """:class:`hitl.engine.ports.RunStore` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def save(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        async def tx(c: Conn) -> int:
            stored = await c.fetchval("SELECT version FROM checkpoints WHERE run_id = $1", run_id)
            claim_rules.check_checkpoint_version(run_id, stored or 0, expected_version)
            await c.execute(
                "INSERT INTO checkpoints (run_id, version, data, updated_at, status) VALUES ($1, $2, $3, $4, $5) "
                "ON CONFLICT (run_id) DO UPDATE SET version = excluded.version, data = excluded.data, "
                "updated_at = excluded.updated_at, status = excluded.status",
                run_id,
                expected_version + 1,
                dumps(data),
                now,
                str(data.get("status", "")),
            )
            return expected_version + 1

        return await self.db.run(tx)

    async def load(self, run_id: str) -> StoredRun | None:
        async def tx(c: Conn) -> StoredRun | None:
            row = await c.fetchrow("SELECT data, version FROM checkpoints WHERE run_id = $1", run_id)
            return StoredRun(loads(row[0]), int(row[1])) if row else None

        return await self.db.run(tx, write=False)

    async def paused(self, *, limit: int = 500, after: str | None = None) -> list[str]:
        async def tx(c: Conn) -> list[str]:
            rows = await c.fetch(
                "SELECT run_id FROM checkpoints WHERE status = 'paused' AND run_id > $1 ORDER BY run_id LIMIT $2",
                after or "",
                limit,
            )
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)

    async def own(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        return await self.db.run(lambda c: own_run(c, run_id, holder, now, lease))

    async def renew(self, run_id: str, *, holder: str, now: float, lease: float) -> bool:
        async def tx(c: Conn) -> bool:
            done = await c.execute(
                "UPDATE run_owners SET lease_until = $1 WHERE run_id = $2 AND holder = $3", now + lease, run_id, holder
            )
            return rows_touched(done) > 0

        return await self.db.run(tx)

    async def release(self, run_id: str, *, holder: str) -> None:
        async def tx(c: Conn) -> None:
            await c.execute("DELETE FROM run_owners WHERE run_id = $1 AND holder = $2", run_id, holder)

        await self.db.run(tx)

    async def orphaned(self, *, now: float, limit: int = 100) -> list[str]:
        async def tx(c: Conn) -> list[str]:
            rows = await c.fetch(
                "SELECT c.run_id FROM checkpoints c LEFT JOIN run_owners o ON o.run_id = c.run_id "
                "WHERE c.status = 'running' AND (o.lease_until IS NULL OR o.lease_until <= $1) "
                "ORDER BY COALESCE(o.lease_until, c.updated_at), c.run_id LIMIT $2",
                now,
                limit,
            )
            return [str(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
