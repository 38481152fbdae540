"""Receipts in Redis: one hash per receipt issued (written by the claim's script), spent once by a script, expiring
on its own past its ``exp`` and the leeway; per approval, a hash that says whether a receipt of it was spent first or
it was withdrawn first (the redeem script and the withdrawal's both decide on it)."""

from __future__ import annotations

from hitl.engine.receipts.claims import LEEWAY, Issued, ReceiptStatus, Redemption, Withdrawal
from hitl.engine.storage.redis.codec import text
from hitl.engine.storage.redis.part import RedisPart

__all__ = ["RedisReceipts", "receipt_record"]


def receipt_record(receipt: Issued, *, now: float) -> list[str]:
    """The arguments that record ``receipt`` with its claim (``receipt_issued`` in ``claims.lua``): the claim's key,
    its exp, and how many milliseconds the record is kept (to its exp and the leeway, counted from ``now``, whatever
    the server's clock says)."""
    return [receipt.key, repr(receipt.exp), str(max(1, int((receipt.exp + LEEWAY - now) * 1000)))]


class RedisReceipts(RedisPart):
    """:class:`hitl.engine.receipts.ports.ReceiptLedger` on Redis."""

    async def redeem(self, jti: str, *, approval: str, redemption: str | None, now: float) -> Redemption:
        args = [redemption or "", repr(now), repr(LEEWAY)]
        keys = [self.conn.receipt_key(jti), self.conn.receipt_approval_key(approval)]
        found = await self.conn.call(self.conn.redeem_script, keys, args)
        return Redemption(text(found[0]))

    async def withdraw(self, approval: str, *, now: float) -> Withdrawal:
        keys = [self.conn.receipt_approval_key(approval)]
        found = await self.conn.call(self.conn.withdraw_script, keys, [repr(now)])
        return Withdrawal(text(found[0]))

    async def status(self, jti: str, *, approval: str, now: float) -> ReceiptStatus:
        redeemed, exp = await self.conn.r.hmget(self.conn.receipt_key(jti), ["redeemed", "exp"])
        if text(redeemed) == "1":
            return ReceiptStatus.CONSUMED
        if text(await self.conn.r.hget(self.conn.receipt_approval_key(approval), "state")) == "withdrawn":
            return ReceiptStatus.WITHDRAWN
        return ReceiptStatus.ACTIVE if exp is not None and now <= float(text(exp)) else ReceiptStatus.EXPIRED

    async def issued(self, jti: str) -> Issued | None:
        key, exp = await self.conn.r.hmget(self.conn.receipt_key(jti), ["key", "exp"])
        return Issued(jti=jti, key=text(key), exp=float(text(exp))) if key is not None else None

    async def purge(self, *, now: float) -> int:
        return 0  # each record expires on its own (its key's TTL is its exp and the leeway)
