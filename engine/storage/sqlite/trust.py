"""Session trust grants in SQLite."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.records import AuditEntry, TrustGrant
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqliteTrust"]


class SqliteTrust:
    """:class:`hitl.engine.ports.TrustStore` on SQLite; grants and revocations are audited in the same transaction."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def grant(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO trust (session_id, tool, granted_by, until) VALUES (?, ?, ?, ?)",
                (session_id, tool, by, until),
            )
            insert_audit(c, AuditEntry(at=now, actor=by, event="trust_granted", detail=f"{tool} in {session_id}"))

        await self.db.run(tx)

    async def active(self, session_id: str, *, now: float) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT tool, granted_by, until FROM trust WHERE session_id = ? AND until > ? ORDER BY tool",
                (session_id, now),
            ).fetchall()
            return [TrustGrant(session_id=session_id, tool=t, granted_by=b, until=u) for t, b, u in rows]

        return await self.db.run(tx, write=False)

    async def all_active(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        def tx(c: sqlite3.Connection) -> list[TrustGrant]:
            rows = c.execute(
                "SELECT session_id, tool, granted_by, until FROM trust WHERE until > ? ORDER BY session_id, tool "
                "LIMIT ?",
                (now, limit),
            ).fetchall()
            return [TrustGrant(session_id=s, tool=t, granted_by=b, until=u) for s, t, b, u in rows]

        return await self.db.run(tx, write=False)

    async def revoke(self, session_id: str, tool: str, *, by: str, now: float) -> bool:
        def tx(c: sqlite3.Connection) -> bool:
            n = c.execute(
                "DELETE FROM trust WHERE session_id = ? AND tool = ? AND until > ?", (session_id, tool, now)
            ).rowcount
            if n:
                insert_audit(c, AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool} in {session_id}"))
            return bool(n)

        return await self.db.run(tx)
