"""Delegations in SQLite: one row per delegation, kept after it ends; each given or ended in one transaction with
its audit entry."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.delegation import Delegation
from hitl.engine.storage.codec import audit_for_delegation, audit_for_delegation_end
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqliteDelegations"]

_IN_FORCE = "ended_at IS NULL AND until > ?"


class SqliteDelegations:
    """:class:`hitl.engine.ports.DelegationStore` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def give(self, delegation: Delegation, *, now: float) -> Delegation | None:
        def tx(c: sqlite3.Connection) -> Delegation | None:
            row = c.execute(
                f"SELECT doc FROM delegations WHERE delegator = ? AND {_IN_FORCE}", (delegation.delegator, now)
            ).fetchone()
            if row is not None:
                return Delegation.model_validate_json(row[0])
            c.execute(
                "INSERT INTO delegations (id, delegator, until, ended_at, doc) VALUES (?, ?, ?, NULL, ?)",
                (delegation.id, delegation.delegator, delegation.until, delegation.model_dump_json()),
            )
            insert_audit(c, audit_for_delegation(delegation, now=now))
            return None

        return await self.db.run(tx)

    async def end(self, delegation_id: str, *, by: str, now: float) -> Delegation | None:
        def tx(c: sqlite3.Connection) -> Delegation | None:
            row = c.execute(
                f"SELECT doc FROM delegations WHERE id = ? AND {_IN_FORCE}", (delegation_id, now)
            ).fetchone()
            if row is None:
                return None
            return _ended(c, Delegation.model_validate_json(row[0]).ended(by=by, now=now), now)

        return await self.db.run(tx)

    async def active(self, *, now: float) -> list[Delegation]:
        def tx(c: sqlite3.Connection) -> list[Delegation]:
            rows = c.execute(f"SELECT doc FROM delegations WHERE {_IN_FORCE} ORDER BY rowid", (now,)).fetchall()
            return [d for d in (Delegation.model_validate_json(r[0]) for r in rows) if d.in_force(now)]

        return await self.db.run(tx, write=False)

    async def lapsed(self, *, now: float, limit: int = 100) -> list[Delegation]:
        def tx(c: sqlite3.Connection) -> list[Delegation]:
            rows = c.execute(
                "SELECT doc FROM delegations WHERE ended_at IS NULL AND until <= ? ORDER BY until LIMIT ?", (now, limit)
            ).fetchall()
            out = []
            for (doc,) in rows:
                d = Delegation.model_validate_json(doc)
                out.append(_ended(c, d.ended(by="expiry", now=d.until), now))
            return out

        return await self.db.run(tx)


def _ended(c: sqlite3.Connection, d: Delegation, now: float) -> Delegation:
    c.execute("UPDATE delegations SET ended_at = ?, doc = ? WHERE id = ?", (d.ended_at, d.model_dump_json(), d.id))
    insert_audit(c, audit_for_delegation_end(d, now=now))
    return d
