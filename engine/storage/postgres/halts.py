"""The stop switch's orders in PostgreSQL: each given or lifted in one transaction with its audit entry."""

from __future__ import annotations

from hitl.engine.domain.halts import HaltOrder
from hitl.engine.storage.codec import audit_for_halt
from hitl.engine.storage.postgres.connection import Conn, PgConnection
from hitl.engine.storage.postgres.rows import insert_audit

__all__ = ["PgHalts"]


class PgHalts:
    """:class:`hitl.engine.ports.HaltOrders` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def halt(self, order: HaltOrder) -> None:
        async def tx(c: Conn) -> None:
            await c.execute(
                "INSERT INTO halts (scope, doc) VALUES ($1, $2) ON CONFLICT (scope) DO UPDATE SET doc = excluded.doc",
                order.scope,
                order.model_dump_json(),
            )
            await insert_audit(c, audit_for_halt(order, "halted"))

        await self.db.run(tx)

    async def lift(self, scope: str, *, by: str, now: float) -> HaltOrder | None:
        async def tx(c: Conn) -> HaltOrder | None:
            doc = await c.fetchval("DELETE FROM halts WHERE scope = $1 RETURNING doc", scope)
            if doc is None:
                return None
            order = HaltOrder.model_validate_json(doc)
            await insert_audit(c, audit_for_halt(order.model_copy(update={"by": by, "at": now}), "unhalted"))
            return order

        return await self.db.run(tx)

    async def active(self) -> list[HaltOrder]:
        async def tx(c: Conn) -> list[HaltOrder]:
            rows = await c.fetch("SELECT doc FROM halts ORDER BY scope")
            return [HaltOrder.model_validate_json(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
