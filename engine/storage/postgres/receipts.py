"""Receipts in PostgreSQL: one row per receipt issued (written by the execution claim's own statement: see
:meth:`~hitl.engine.storage.postgres.writes.Writes.claim`), spent once
(a row lock: two redeems at once are one after the other)."""

from __future__ import annotations

from hitl.engine.receipts.claims import LEEWAY, Issued, Redemption
from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgReceipts"]


class PgReceipts:
    """:class:`hitl.engine.receipts.ports.ReceiptLedger` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def redeem(self, jti: str, *, redemption: str | None, now: float) -> Redemption:
        async def tx(c: Conn) -> Redemption:
            row = await c.fetchrow(
                "SELECT redeemed, redemption FROM receipts WHERE jti = $1 AND exp + $2 >= $3 FOR UPDATE",
                jti,
                LEEWAY,
                now,
            )
            if row is None:
                return Redemption.UNKNOWN
            if row[0]:
                return Redemption.AGAIN if redemption is not None and row[1] == redemption else Redemption.SPENT
            await c.execute("UPDATE receipts SET redeemed = true, redemption = $2 WHERE jti = $1", jti, redemption)
            return Redemption.FIRST

        return await self.db.run(tx)

    async def issued(self, jti: str) -> Issued | None:
        async def tx(c: Conn) -> Issued | None:
            row = await c.fetchrow("SELECT key, exp FROM receipts WHERE jti = $1", jti)
            return Issued(jti=jti, key=row[0], exp=row[1]) if row is not None else None

        return await self.db.run(tx, write=False)

    async def purge(self, *, now: float) -> int:
        async def tx(c: Conn) -> int:
            done = await c.execute("DELETE FROM receipts WHERE exp + $1 < $2", LEEWAY, now)
            return int(done.split()[-1])

        return await self.db.run(tx)
