"""Receipts in PostgreSQL: one row per receipt issued (written by the execution claim's own statement: see
:meth:`~hitl.engine.storage.postgres.writes.Writes.claim`), spent once
(a row lock: two redeems at once are one after the other); and per approval, whether a receipt of it was spent first
or it was withdrawn first (``receipt_approvals``, read and written by both in a serializable transaction, so one of
two at once is run again on what the other committed)."""

from __future__ import annotations

from hitl.engine.receipts.claims import LEEWAY, Issued, ReceiptStatus, Redemption, Withdrawal
from hitl.engine.storage.postgres.connection import Conn, PgConnection

__all__ = ["PgReceipts"]


class PgReceipts:
    """:class:`hitl.engine.receipts.ports.ReceiptLedger` on PostgreSQL."""

    def __init__(self, db: PgConnection) -> None:
        self.db = db

    async def redeem(self, jti: str, *, approval: str, redemption: str | None, now: float) -> Redemption:
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
            if await _approval_state(c, approval) == "withdrawn":
                return Redemption.WITHDRAWN
            await c.execute(
                "INSERT INTO receipt_approvals (approval_id, state, at) VALUES ($1, 'spent', $2) "
                "ON CONFLICT (approval_id) DO NOTHING",
                approval,
                now,
            )
            await c.execute("UPDATE receipts SET redeemed = true, redemption = $2 WHERE jti = $1", jti, redemption)
            return Redemption.FIRST

        return await self.db.run(tx)

    async def withdraw(self, approval: str, *, now: float) -> Withdrawal:
        async def tx(c: Conn) -> Withdrawal:
            state = await _approval_state(c, approval)
            if state == "spent":
                return Withdrawal.SPENT
            if state == "withdrawn":
                return Withdrawal.ALREADY
            await c.execute(
                "INSERT INTO receipt_approvals (approval_id, state, at) VALUES ($1, 'withdrawn', $2)", approval, now
            )
            return Withdrawal.WITHDRAWN

        return await self.db.run(tx)

    async def status(self, jti: str, *, approval: str, now: float) -> ReceiptStatus:
        async def tx(c: Conn) -> ReceiptStatus:
            row = await c.fetchrow(
                "SELECT r.redeemed, r.exp, a.state FROM (SELECT 1) one "
                "LEFT JOIN receipts r ON r.jti = $1 LEFT JOIN receipt_approvals a ON a.approval_id = $2",
                jti,
                approval,
            )
            assert row is not None
            if row[0]:
                return ReceiptStatus.CONSUMED
            if row[2] == "withdrawn":
                return ReceiptStatus.WITHDRAWN
            return ReceiptStatus.ACTIVE if row[1] is not None and now <= row[1] else ReceiptStatus.EXPIRED

        return await self.db.run(tx, write=False)

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


async def _approval_state(c: Conn, approval: str) -> str | None:
    """``spent`` (a receipt of ``approval`` was spent first), ``withdrawn``, or None (neither yet)."""
    row = await c.fetchrow("SELECT state FROM receipt_approvals WHERE approval_id = $1", approval)
    return str(row[0]) if row is not None else None
