"""Trust grants in SQLite: one row per (session, requester, tool)."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.records import TrustGrant
from hitl.engine.storage.codec import audit_for_grant, audit_for_revocation, grant_of
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqliteTrust", "insert_grant"]

_COLUMNS = "session_id, requester, tool, granted_by, until"


def insert_grant(c: sqlite3.Connection, grant: TrustGrant) -> None:
    """Write ``grant`` in the caller's transaction (a decision's, for a Trust), replacing an earlier one."""
    c.execute(
        f"INSERT OR REPLACE INTO trust_grants ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
        (grant.session_id, grant.requester, grant.tool, grant.granted_by, grant.until),
    )


class SqliteTrust:
    """:class:`hitl.engine.ports.TrustStore` on SQLite; grants and revocations are audited in the same transaction."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def grant(self, grant: TrustGrant, *, now: float) -> None:
        def tx(c: sqlite3.Connection) -> None:
            insert_grant(c, grant)
            insert_audit(c, audit_for_grant(grant, now=now))

        await self.db.run(tx)

    async def active(self, session_id: str, *, requester: str, now: float) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM trust_grants WHERE session_id = ? AND requester = ? AND until > ? "
                "ORDER BY tool",
                (session_id, requester, now),
            ).fetchall()
            return [grant_of(r) for r in rows]

        return await self.db.run(tx, write=False)

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                f"SELECT {_COLUMNS} FROM trust_grants WHERE until > ? ORDER BY session_id, requester, tool LIMIT ?",
                (now, limit),
            ).fetchall()
            return [grant_of(r) for r in rows]

        return await self.db.run(tx, write=False)

    async def revoke(self, session_id: str, tool: str, *, requester: str | None = None, by: str, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            sql = "DELETE FROM trust_grants WHERE session_id = ? AND tool = ? AND until > ?"
            params: list[object] = [session_id, tool, now]
            if requester is not None:
                sql += " AND requester = ?"
                params.append(requester)
            n = c.execute(sql, params).rowcount
            if n:
                insert_audit(c, audit_for_revocation(session_id, tool, requester=requester, by=by, now=now))
            return int(n)

        return await self.db.run(tx)
