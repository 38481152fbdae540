"""Conformance for receipts: recorded by the execution claim that issued them, in its atomic step, and only then;
spent once (a retry under the same redemption id is told so); unknown once past their expiry.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.receipts import Issued, Redemption
from hitl.engine.errors import ClaimRefused
from hitl.engine.ports import Store

__all__ = ["ReceiptsConformance"]


def _receipt(clock: FakeClock, jti: str, key: str = "call:apr_1") -> Issued:
    return Issued(jti=jti, key=key, exp=clock.now() + 300)


class ReceiptsConformance:
    """What every store must do here."""

    async def test_a_receipt_is_recorded_only_by_the_claim_that_issued_it(self, store: Store, clock: FakeClock) -> None:
        ledger, now = store.ledger, clock.now()
        first = await ledger.claim(
            "call:apr_1", action_hash="h", holder="w1", now=now, lease=30, receipt=_receipt(clock, "r1")
        )
        assert first.acquired and await store.receipts.issued("r1") == _receipt(clock, "r1")
        with pytest.raises(ClaimRefused):  # held by w1: refused, nothing recorded
            await ledger.claim(
                "call:apr_1", action_hash="h", holder="w2", now=now, lease=30, receipt=_receipt(clock, "r2")
            )
        with pytest.raises(ClaimRefused):  # another action under the key: refused, nothing recorded
            await ledger.claim(
                "call:apr_1", action_hash="x", holder="w2", now=now, lease=30, receipt=_receipt(clock, "r3")
            )
        clock.advance(31)  # w1's lease ran out: the next claim recovers it (in doubt, nothing runs): no receipt
        recovered = await ledger.claim(
            "call:apr_1", action_hash="h", holder="w3", now=clock.now(), lease=30, receipt=_receipt(clock, "r4")
        )
        assert recovered.acquired and recovered.recovered
        await ledger.record_outcome(
            "call:apr_1", holder="w3", attempt=recovered.attempt, ok=True, result={}, now=clock.now()
        )
        done = await ledger.claim(
            "call:apr_1", action_hash="h", holder="w4", now=clock.now(), lease=30, receipt=_receipt(clock, "r5")
        )
        assert not done.acquired  # it ran: nothing recorded
        for jti in ("r2", "r3", "r4", "r5"):
            assert await store.receipts.issued(jti) is None
        plain = await ledger.claim("call:apr_2", action_hash="h", holder="w1", now=clock.now(), lease=30)
        assert plain.acquired  # a claim without a receipt, as before

    async def test_a_receipt_is_spent_once(self, store: Store, clock: FakeClock) -> None:
        await store.ledger.claim(
            "call:apr_1", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r1")
        )
        await store.ledger.claim(
            "call:apr_2", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r2")
        )
        redeem = store.receipts.redeem
        assert await redeem("r1", redemption="pay-1", now=clock.now()) is Redemption.FIRST
        assert await redeem("r1", redemption="pay-1", now=clock.now()) is Redemption.AGAIN  # the same use, retried
        assert await redeem("r1", redemption="pay-2", now=clock.now()) is Redemption.SPENT
        assert await redeem("r1", redemption=None, now=clock.now()) is Redemption.SPENT
        assert await redeem("r2", redemption=None, now=clock.now()) is Redemption.FIRST
        assert await redeem("r2", redemption=None, now=clock.now()) is Redemption.SPENT  # no id: never "again"
        assert await redeem("never", redemption=None, now=clock.now()) is Redemption.UNKNOWN

    async def test_simultaneous_redeems_spend_it_once(self, store: Store, clock: FakeClock) -> None:
        await store.ledger.claim(
            "call:apr_1", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r1")
        )
        found = await asyncio.gather(
            *(store.receipts.redeem("r1", redemption=f"u{i}", now=clock.now()) for i in range(20))
        )
        assert found.count(Redemption.FIRST) == 1 and found.count(Redemption.SPENT) == 19

    async def test_past_its_expiry_and_the_leeway_a_receipt_is_unknown_and_purged(
        self, store: Store, clock: FakeClock
    ) -> None:
        await store.ledger.claim(
            "call:apr_1", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r1")
        )
        clock.advance(300 + 30)  # its exp and the leeway: still known
        assert await store.receipts.redeem("r1", redemption=None, now=clock.now()) is Redemption.FIRST
        await store.ledger.claim(
            "call:apr_2", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r2")
        )
        clock.advance(331)
        assert await store.receipts.redeem("r2", redemption=None, now=clock.now()) is Redemption.UNKNOWN
        assert await store.receipts.purge(now=clock.now()) >= 0
        assert await store.receipts.redeem("r2", redemption=None, now=clock.now()) is Redemption.UNKNOWN
