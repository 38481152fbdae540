"""Delegations in PostgreSQL: one row per delegation, kept after it ends; each given or ended in one serializable
transaction with its audit entry (two gives by one delegator at once: one of them runs again and sees the other)."""

from __future__ import annotations

from hitl.engine.domain.delegation import Delegation
from hitl.engine.storage.codec import audit_for_delegation, audit_for_delegation_end
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit

__all__ = ["PgDelegations"]


class PgDelegations:
    """:class:`hitl.engine.ports.DelegationStore` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def give(self, delegation: Delegation, *, now: float) -> Delegation | None:
        async def tx(c: Conn) -> Delegation | None:
            doc = await c.fetchval(
                "SELECT doc FROM delegations WHERE delegator = $1 AND ended_at IS NULL AND until > $2",
                delegation.delegator,
                now,
            )
            if doc is not None:
                return Delegation.model_validate_json(doc)
            await c.execute(
                "INSERT INTO delegations (id, delegator, given_at, until, doc) VALUES ($1, $2, $3, $4, $5)",
                delegation.id,
                delegation.delegator,
                delegation.given_at,
                delegation.until,
                delegation.model_dump_json(),
            )
            entry = audit_for_delegation(delegation, now=now)
            await insert_audit(c, entry)
            return None

        return await self.db.run(tx)

    async def end(self, delegation_id: str, *, by: str, now: float) -> Delegation | None:
        async def tx(c: Conn) -> Delegation | None:
            doc = await c.fetchval(
                "SELECT doc FROM delegations WHERE id = $1 AND ended_at IS NULL AND until > $2", delegation_id, now
            )
            if doc is None:
                return None
            return await _ended(c, Delegation.model_validate_json(doc).ended(by=by, now=now), now)

        return await self.db.run(tx)

    async def active(self, *, now: float) -> list[Delegation]:
        async def tx(c: Conn) -> list[Delegation]:
            rows = await c.fetch(
                "SELECT doc FROM delegations WHERE ended_at IS NULL AND until > $1 ORDER BY given_at, id", now
            )
            return [d for d in (Delegation.model_validate_json(r[0]) for r in rows) if d.in_force(now)]

        return await self.db.run(tx, write=False)

    async def lapsed(self, *, now: float, limit: int = 100) -> list[Delegation]:
        async def tx(c: Conn) -> list[Delegation]:
            rows = await c.fetch(
                "SELECT doc FROM delegations WHERE ended_at IS NULL AND until <= $1 ORDER BY until, id LIMIT $2",
                now,
                limit,
            )
            out = []
            for (doc,) in rows:
                d = Delegation.model_validate_json(doc)
                out.append(await _ended(c, d.ended(by="expiry", now=d.until), now))
            return out

        return await self.db.run(tx)


async def _ended(c: Conn, d: Delegation, now: float) -> Delegation:
    await c.execute(
        "UPDATE delegations SET ended_at = $1, doc = $2 WHERE id = $3", d.ended_at, d.model_dump_json(), d.id
    )
    entry = audit_for_delegation_end(d, now=now)
    await insert_audit(c, entry)
    return d
