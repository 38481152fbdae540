"""Trust grants in PostgreSQL: one row per (session, requester, tool); grants and revocations are audited in the
same transaction."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.records import TrustGrant
from hitl.engine.storage.codec import audit_for_grant, audit_for_revocation, grant_of
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit, rows_touched

__all__ = ["GRANT_SQL", "PgTrust"]

_COLUMNS = "session_id, requester, tool, granted_by, until"

GRANT_SQL = (
    f"INSERT INTO trust_grants ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, requester, tool) "
    "DO UPDATE SET granted_by = excluded.granted_by, until = excluded.until"
)
"""Writes one grant (``$1``..``$5``: session, requester, tool, granted by, until), replacing an earlier one."""


class PgTrust:
    """:class:`hitl.engine.ports.TrustStore` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def grant(self, grant: TrustGrant, *, now: float) -> None:
        async def tx(c: Conn) -> None:
            await c.execute(GRANT_SQL, grant.session_id, grant.requester, grant.tool, grant.granted_by, grant.until)
            await insert_audit(c, audit_for_grant(grant, now=now))

        await self.db.run(tx)

    async def active(self, session_id: str, *, requester: str, now: float) -> list[TrustGrant]:
        async def tx(c: Conn) -> list[TrustGrant]:
            rows = await c.fetch(
                f"SELECT {_COLUMNS} FROM trust_grants WHERE session_id = $1 AND requester = $2 AND until > $3 "
                "ORDER BY tool",
                session_id,
                requester,
                now,
            )
            return [grant_of(r) for r in rows]

        return await self.db.run(tx, write=False)

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        async def tx(c: Conn) -> list[TrustGrant]:
            rows = await c.fetch(
                f"SELECT {_COLUMNS} FROM trust_grants WHERE until > $1 ORDER BY session_id, requester, tool LIMIT $2",
                now,
                limit,
            )
            return [grant_of(r) for r in rows]

        return await self.db.run(tx, write=False)

    async def revoke(self, session_id: str, tool: str, *, requester: str | None = None, by: str, now: float) -> int:
        async def tx(c: Conn) -> int:
            sql = "DELETE FROM trust_grants WHERE session_id = $1 AND tool = $2 AND until > $3"
            params: list[Any] = [session_id, tool, now]
            if requester is not None:
                sql += " AND requester = $4"
                params.append(requester)
            n = rows_touched(await c.execute(sql, *params))
            if n:
                await insert_audit(c, audit_for_revocation(session_id, tool, requester=requester, by=by, now=now))
            return n

        return await self.db.run(tx)
