"""Receipts in SQLite: one row per receipt issued (written by the execution claim's transaction), spent once; and per
approval, whether a receipt of it was spent first or it was withdrawn first (``receipt_approvals``: the one row a
redeem and a withdrawal both write, so the file's write lock puts one after the other)."""

from __future__ import annotations

import sqlite3

from hitl.engine.receipts.claims import LEEWAY, Issued, ReceiptStatus, Redemption, Withdrawal, withdrawn_refusal
from hitl.engine.storage.sqlite.connection import SqliteConnection

__all__ = ["SqliteReceipts", "insert_receipt", "refuse_withdrawn"]


def insert_receipt(c: sqlite3.Connection, receipt: Issued) -> None:
    """Record ``receipt``'s issue in the caller's transaction (the execution claim's)."""
    c.execute(
        "INSERT INTO receipts (jti, key, exp, redeemed, redemption) VALUES (?, ?, ?, 0, NULL)",
        (receipt.jti, receipt.key, receipt.exp),
    )


def refuse_withdrawn(c: sqlite3.Connection, receipt: Issued | None) -> None:
    """In the claim's transaction, before it writes anything: raise ``action_rejected`` when ``receipt`` is an
    approved action's (:attr:`~hitl.engine.receipts.claims.Issued.audit`) whose approval was withdrawn."""
    approval = receipt.audit.approval_id if receipt is not None and receipt.audit is not None else None
    if approval and _approval_state(c, approval) == "withdrawn":
        raise withdrawn_refusal(approval)


class SqliteReceipts:
    """:class:`hitl.engine.receipts.ports.ReceiptLedger` on SQLite."""

    def __init__(self, db: SqliteConnection) -> None:
        self.db = db

    async def redeem(self, jti: str, *, approval: str, redemption: str | None, now: float) -> Redemption:
        def tx(c: sqlite3.Connection) -> Redemption:
            row = c.execute(
                "SELECT redeemed, redemption FROM receipts WHERE jti = ? AND exp + ? >= ?", (jti, LEEWAY, now)
            ).fetchone()
            if row is None:
                return Redemption.UNKNOWN
            if row[0]:
                return Redemption.AGAIN if redemption is not None and row[1] == redemption else Redemption.SPENT
            if _approval_state(c, approval) == "withdrawn":
                return Redemption.WITHDRAWN
            c.execute(
                "INSERT OR IGNORE INTO receipt_approvals (approval_id, state, at) VALUES (?, 'spent', ?)",
                (approval, now),
            )
            c.execute("UPDATE receipts SET redeemed = 1, redemption = ? WHERE jti = ?", (redemption, jti))
            return Redemption.FIRST

        return await self.db.run(tx)

    async def withdraw(self, approval: str, *, now: float) -> Withdrawal:
        def tx(c: sqlite3.Connection) -> Withdrawal:
            state = _approval_state(c, approval)
            if state == "spent":
                return Withdrawal.SPENT
            if state == "withdrawn":
                return Withdrawal.ALREADY
            c.execute(
                "INSERT INTO receipt_approvals (approval_id, state, at) VALUES (?, 'withdrawn', ?)", (approval, now)
            )
            return Withdrawal.WITHDRAWN

        return await self.db.run(tx)

    async def status(self, jti: str, *, approval: str, now: float) -> ReceiptStatus:
        def tx(c: sqlite3.Connection) -> ReceiptStatus:
            row = c.execute("SELECT redeemed, exp FROM receipts WHERE jti = ?", (jti,)).fetchone()
            if row is not None and row[0]:
                return ReceiptStatus.CONSUMED
            if _approval_state(c, approval) == "withdrawn":
                return ReceiptStatus.WITHDRAWN
            return ReceiptStatus.ACTIVE if row is not None and now <= row[1] else ReceiptStatus.EXPIRED

        return await self.db.run(tx, write=False)

    async def issued(self, jti: str) -> Issued | None:
        def tx(c: sqlite3.Connection) -> Issued | None:
            row = c.execute("SELECT key, exp FROM receipts WHERE jti = ?", (jti,)).fetchone()
            return Issued(jti=jti, key=row[0], exp=row[1]) if row is not None else None

        return await self.db.run(tx, write=False)

    async def purge(self, *, now: float) -> int:
        def tx(c: sqlite3.Connection) -> int:
            return int(c.execute("DELETE FROM receipts WHERE exp + ? < ?", (LEEWAY, now)).rowcount)

        return await self.db.run(tx)


def _approval_state(c: sqlite3.Connection, approval: str) -> str | None:
    """``spent`` (a receipt of ``approval`` was spent first), ``withdrawn``, or None (neither yet)."""
    row = c.execute("SELECT state FROM receipt_approvals WHERE approval_id = ?", (approval,)).fetchone()
    return str(row[0]) if row is not None else None
