"""The stop switch's orders in SQLite: each given or lifted in one transaction with its audit entry."""

from __future__ import annotations

import sqlite3

from hitl.engine.domain.halts import HaltOrder
from hitl.engine.storage.codec import audit_for_halt
from hitl.engine.storage.sqlite.connection import SqliteConnection
from hitl.engine.storage.sqlite.rows import insert_audit

__all__ = ["SqliteHalts"]


class SqliteHalts:
    """:class:`hitl.engine.ports.HaltOrders` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def halt(self, order: HaltOrder) -> None:
        def tx(c: sqlite3.Connection) -> None:
            c.execute("INSERT OR REPLACE INTO halts (scope, doc) VALUES (?, ?)", (order.scope, order.model_dump_json()))
            insert_audit(c, audit_for_halt(order, "halted"))

        await self.db.run(tx)

    async def lift(self, scope: str, *, by: str, now: float) -> HaltOrder | None:
        def tx(c: sqlite3.Connection) -> HaltOrder | None:
            row = c.execute("SELECT doc FROM halts WHERE scope = ?", (scope,)).fetchone()
            if row is None:
                return None
            c.execute("DELETE FROM halts WHERE scope = ?", (scope,))
            order = HaltOrder.model_validate_json(row[0])
            insert_audit(c, audit_for_halt(order.model_copy(update={"by": by, "at": now}), "unhalted"))
            return order

        return await self.db.run(tx)

    async def active(self) -> list[HaltOrder]:
        def tx(c: sqlite3.Connection) -> list[HaltOrder]:
            rows = c.execute("SELECT doc FROM halts ORDER BY scope").fetchall()
            return [HaltOrder.model_validate_json(r[0]) for r in rows]

        return await self.db.run(tx, write=False)
