"""Session trust grants in PostgreSQL; grants and revocations are audited in the same transaction."""

from __future__ import annotations

from hitl.engine.domain.records import AuditEntry, TrustGrant
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit, rows_touched

__all__ = ["PgTrust"]


class PgTrust:
    """:class:`hitl.engine.ports.TrustStore` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def grant(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        async def tx(c: Conn) -> None:
            await c.execute(
                "INSERT INTO trust (session_id, tool, granted_by, until) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT (session_id, tool) DO UPDATE SET granted_by = excluded.granted_by, until = excluded.until",
                session_id,
                tool,
                by,
                until,
            )
            await insert_audit(c, AuditEntry(at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"))

        await self.db.run(tx)

    async def active(self, session_id: str, *, now: float) -> list[TrustGrant]:
        async def tx(c: Conn) -> list[TrustGrant]:
            rows = await c.fetch(
                "SELECT tool, granted_by, until FROM trust WHERE session_id = $1 AND until > $2 ORDER BY tool",
                session_id,
                now,
            )
            return [TrustGrant(session_id=session_id, tool=t, granted_by=b, until=u) for t, b, u in rows]

        return await self.db.run(tx, write=False)

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        async def tx(c: Conn) -> list[TrustGrant]:
            rows = await c.fetch(
                "SELECT session_id, tool, granted_by, until FROM trust WHERE until > $1 ORDER BY session_id, tool "
                "LIMIT $2",
                now,
                limit,
            )
            return [TrustGrant(session_id=s, tool=t, granted_by=b, until=u) for s, t, b, u in rows]

        return await self.db.run(tx, write=False)

    async def revoke(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        async def tx(c: Conn) -> bool:
            done = await c.execute(
                "DELETE FROM trust WHERE session_id = $1 AND tool = $2 AND until > $3", session_id, tool, now
            )
            if not rows_touched(done):
                return False
            await insert_audit(c, AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}"))
            return True

        return await self.db.run(tx)
