"""Conformance for receipts: recorded by the execution claim that issued them, in its atomic step, and only then;
spent once (a retry under the same redemption id is told so); unknown once past their expiry; withdrawn with their
approval unless one was spent first (a withdrawal racing a redeem: exactly one wins); introspected. ``hitl serve``'s
claims (signed while the claim travels to the store) hand a receipt out only with the attempt it was recorded by, and an
attempt whose receipt could not be signed runs nothing.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from collections.abc import Mapping
from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode
from hitl.engine.ports import Store
from hitl.engine.receipts.claiming import receipt_claims_for
from hitl.engine.receipts.claims import (
    ISSUED_EVENT,
    UNSIGNED_EVENT,
    Issued,
    ReceiptStatus,
    Redemption,
    Withdrawal,
    issued_entry,
)
from hitl.engine.receipts.spec import ReceiptsSpec
from hitl.engine.receipts.unavailable import UnusableKey
from hitl.engine.testing.factories import make_approval

__all__ = ["ReceiptsConformance"]


def _receipt(clock: FakeClock, jti: str, key: str = "call:apr_1") -> Issued:
    return Issued(jti=jti, key=key, exp=clock.now() + 300)


class _Signer:
    """A stand-in for ``hitl serve``'s key: the claims, readable, unsigned; ``broken`` makes it fail instead."""

    def __init__(self) -> None:
        self.broken = False

    def sign(self, claims: Mapping[str, Any]) -> str:
        if self.broken:
            raise RuntimeError("the signing key went away")
        return "e30." + base64.urlsafe_b64encode(json.dumps(dict(claims)).encode()).decode().rstrip("=") + "."


def _jti(receipt: str) -> str:
    body = receipt.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["jti"])


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
        redeem = functools.partial(store.receipts.redeem, approval="apr_1")
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
            *(store.receipts.redeem("r1", approval="apr_1", redemption=f"u{i}", now=clock.now()) for i in range(20))
        )
        assert found.count(Redemption.FIRST) == 1 and found.count(Redemption.SPENT) == 19

    async def test_a_withdrawn_approvals_receipts_are_refused_and_introspected(
        self, store: Store, clock: FakeClock
    ) -> None:
        receipts, now = store.receipts, clock.now()
        for jti, key in (("r1", "call:apr_1"), ("r2", "call:apr_1#1"), ("r3", "call:apr_2")):
            await store.ledger.claim(key, action_hash="h", holder="w", now=now, lease=30, receipt=_receipt(clock, jti))
        assert await receipts.status("r1", approval="apr_1", now=now) is ReceiptStatus.ACTIVE
        assert await receipts.withdraw("apr_1", now=now) is Withdrawal.WITHDRAWN
        assert await receipts.withdraw("apr_1", now=now) is Withdrawal.ALREADY
        for jti in ("r1", "r2"):  # every receipt of it, a batch item's too
            assert await receipts.redeem(jti, approval="apr_1", redemption=None, now=now) is Redemption.WITHDRAWN
            assert await receipts.status(jti, approval="apr_1", now=now) is ReceiptStatus.WITHDRAWN
        assert await receipts.redeem("r3", approval="apr_2", redemption=None, now=now) is Redemption.FIRST
        assert await receipts.status("r3", approval="apr_2", now=now) is ReceiptStatus.CONSUMED
        assert await receipts.withdraw("apr_2", now=now) is Withdrawal.SPENT  # too late: it was acted on
        assert await receipts.status("r3", approval="apr_2", now=now) is ReceiptStatus.CONSUMED
        await store.ledger.claim(
            "call:apr_3", action_hash="h", holder="w", now=now, lease=30, receipt=_receipt(clock, "r4")
        )
        clock.advance(301)
        assert await receipts.status("r4", approval="apr_3", now=clock.now()) is ReceiptStatus.EXPIRED
        assert await receipts.status("never", approval="apr_9", now=clock.now()) is ReceiptStatus.EXPIRED

    async def test_a_withdrawal_racing_a_redeem_exactly_one_wins(self, store: Store, clock: FakeClock) -> None:
        now, pairs = clock.now(), 50
        for i in range(pairs):
            await store.ledger.claim(
                f"call:apr_{i}", action_hash="h", holder="w", now=now, lease=30, receipt=_receipt(clock, f"r{i}")
            )

        async def pair(i: int) -> tuple[Redemption, Withdrawal]:
            redeemed, withdrawn = await asyncio.gather(
                store.receipts.redeem(f"r{i}", approval=f"apr_{i}", redemption=None, now=now),
                store.receipts.withdraw(f"apr_{i}", now=now),
            )
            return redeemed, withdrawn

        for redeemed, withdrawn in await asyncio.gather(*(pair(i) for i in range(pairs))):
            assert (redeemed, withdrawn) in {
                (Redemption.FIRST, Withdrawal.SPENT),
                (Redemption.WITHDRAWN, Withdrawal.WITHDRAWN),
            }

    async def test_past_its_expiry_and_the_leeway_a_receipt_is_unknown_and_purged(
        self, store: Store, clock: FakeClock
    ) -> None:
        await store.ledger.claim(
            "call:apr_1", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r1")
        )
        clock.advance(300 + 30)  # its exp and the leeway: still known
        assert await store.receipts.redeem("r1", approval="apr_1", redemption=None, now=clock.now()) is Redemption.FIRST
        await store.ledger.claim(
            "call:apr_2", action_hash="h", holder="w", now=clock.now(), lease=30, receipt=_receipt(clock, "r2")
        )
        clock.advance(331)
        assert (
            await store.receipts.redeem("r2", approval="apr_2", redemption=None, now=clock.now()) is Redemption.UNKNOWN
        )
        assert await store.receipts.purge(now=clock.now()) >= 0
        assert (
            await store.receipts.redeem("r2", approval="apr_2", redemption=None, now=clock.now()) is Redemption.UNKNOWN
        )

    async def test_an_approved_actions_receipt_is_audited_by_its_claims_step_and_a_withdrawal_refuses_it(
        self, store: Store, clock: FakeClock
    ) -> None:
        ledger, now = store.ledger, clock.now()
        approval = make_approval(now=now, args={"to": "V-1", "amount": 120})
        await store.approvals.create(approval)

        def issued(jti: str) -> Issued:
            return _receipt(clock, jti, "call:k").model_copy(
                update={"audit": issued_entry(approval, jti, actor="w", now=clock.now())}
            )

        def events() -> Any:
            return store.audit.entries(approval_id=approval.id)

        before = len(await events())
        first = await ledger.claim("call:k", action_hash="h", holder="w1", now=now, lease=30, receipt=issued("r1"))
        assert first.acquired and await store.receipts.issued("r1") is not None
        trail = await events()
        assert [e.event for e in trail[before:]] == [ISSUED_EVENT] and trail[-1].detail.startswith("receipt r1 ")
        with pytest.raises(ClaimRefused):  # held: nothing recorded, nothing audited
            await ledger.claim("call:k", action_hash="h", holder="w2", now=now, lease=30, receipt=issued("r2"))
        clock.advance(31)  # w1 stopped: the next claim recovers its attempt, which issues no receipt
        recovered = await ledger.claim(
            "call:k", action_hash="h", holder="w3", now=clock.now(), lease=30, receipt=issued("r3")
        )
        assert recovered.acquired and recovered.recovered
        assert await store.receipts.issued("r2") is None and await store.receipts.issued("r3") is None
        assert len(await events()) == before + 1

        assert await store.receipts.withdraw(approval.id, now=clock.now()) is Withdrawal.WITHDRAWN
        await ledger.record_outcome(
            "call:k", holder="w3", attempt=recovered.attempt, ok=False, result={"error": "x"}, now=clock.now()
        )
        with pytest.raises(EngineError) as refused:  # withdrawn: refused before anything of the claim is written
            await ledger.claim(
                "call:k",
                action_hash="h",
                holder="w4",
                now=clock.now(),
                lease=30,
                retry_failed=True,
                receipt=issued("r4"),
            )
        assert refused.value.code is ErrorCode.ACTION_REJECTED
        kept = await ledger.get("call:k")
        assert kept is not None and kept.state == "failed" and kept.attempt == recovered.attempt
        assert await store.receipts.issued("r4") is None and len(await events()) == before + 1
        # A call run without a person names no approval: nothing refuses it, nothing is audited for it.
        other = await ledger.claim(
            "call:free",
            action_hash="h",
            holder="w",
            now=clock.now(),
            lease=30,
            receipt=_receipt(clock, "r5", "call:free"),
        )
        assert other.acquired and await store.receipts.issued("r5") is not None
        assert (await store.audit.verify())[1] is None

    async def test_claims_racing_withdrawals_issue_a_receipt_only_before_one(
        self, store: Store, clock: FakeClock
    ) -> None:
        now = clock.now()
        approvals = [make_approval(now=now, args={"to": f"V-{i}", "amount": 5}) for i in range(12)]
        for a in approvals:
            await store.approvals.create(a)

        async def claim(a: Any) -> bool:
            receipt = _receipt(clock, f"r_{a.id}", f"call:{a.id}").model_copy(
                update={"audit": issued_entry(a, f"r_{a.id}", actor="w", now=now)}
            )
            try:
                await store.ledger.claim(
                    f"call:{a.id}", action_hash="h", holder="w", now=now, lease=30, receipt=receipt
                )
            except EngineError as exc:
                assert exc.code is ErrorCode.ACTION_REJECTED
                return False
            return True

        async def pair(a: Any) -> tuple[bool, Withdrawal]:
            got, withdrawn = await asyncio.gather(claim(a), store.receipts.withdraw(a.id, now=now))
            return got, withdrawn

        for a, (claimed, withdrawn) in zip(approvals, await asyncio.gather(*(pair(a) for a in approvals)), strict=True):
            assert withdrawn is Withdrawal.WITHDRAWN  # nothing was spent: the withdrawal always lands
            trail = [e for e in await store.audit.entries(approval_id=a.id) if e.event == ISSUED_EVENT]
            recorded = await store.receipts.issued(f"r_{a.id}")
            # Issued (recorded and audited together) only by a claim before the withdrawal; refused after it.
            assert (recorded is not None) is claimed and len(trail) == int(claimed)
            if claimed:
                redeemed = await store.receipts.redeem(f"r_{a.id}", approval=a.id, redemption=None, now=now)
                assert redeemed is Redemption.WITHDRAWN
        assert (await store.audit.verify())[1] is None

    async def test_hitl_serves_claim_hands_out_the_receipt_its_attempt_recorded(
        self, store: Store, clock: FakeClock
    ) -> None:
        spec, signer = ReceiptsSpec(issuer="https://hitl.example.com"), _Signer()
        claims = receipt_claims_for(spec, store=store, clock=clock, signer=signer, production=True, environ={})
        approval = make_approval(now=clock.now(), args={"to": "V-1", "amount": 120})

        async def claim(holder: str) -> tuple[bool, str | None]:
            got = await claims.claim(
                approval, approval.args, key="call:k", action_hash="h", holder=holder, lease=30, retry_failed=True
            )
            return got.claim.acquired, got.receipt

        acquired, receipt = await claim("w1")
        assert acquired and receipt is not None and await store.receipts.issued(_jti(receipt)) is not None
        with pytest.raises(ClaimRefused):  # held by w1: no receipt for w2
            await claim("w2")

        # A receipt that cannot be signed: the attempt it was claimed for is failed at once, so nothing runs under
        # it, and the next claim starts a new attempt with a new receipt.
        signer.broken = True
        await store.ledger.record_outcome(
            "call:k", holder="w1", attempt=1, ok=False, result={"error": "declined"}, now=clock.now()
        )
        with pytest.raises(EngineError, match="went away") as refused:
            await claim("w3")
        assert refused.value.code is ErrorCode.RECEIPT_UNAVAILABLE
        failed = await store.ledger.get("call:k")
        assert failed is not None and failed.attempt == 2 and failed.state == "failed" and failed.result is not None
        assert "no receipt could be signed" in str(failed.result["error"])
        # Its issue was audited with its claim, then that it was never handed out (no evidence record names it).
        trail = await store.audit.entries(approval_id=approval.id)
        assert [e.event for e in trail if e.event in (ISSUED_EVENT, UNSIGNED_EVENT)] == [
            ISSUED_EVENT,
            ISSUED_EVENT,
            UNSIGNED_EVENT,
        ]
        assert trail[-1].detail.split()[1] == trail[-2].detail.split()[1] != _jti(receipt)
        signer.broken = False
        acquired, again = await claim("w4")
        assert acquired and again is not None and _jti(again) != _jti(receipt)

    async def test_hitl_serve_with_an_unusable_key_claims_nothing(self, store: Store, clock: FakeClock) -> None:
        spec = ReceiptsSpec(issuer="https://hitl.example.com")
        claims = receipt_claims_for(spec, store=store, clock=clock, signer=UnusableKey(), production=False, environ={})
        approval = make_approval(now=clock.now(), args={"to": "V-1", "amount": 120})
        with pytest.raises(EngineError) as refused:
            await claims.claim(approval, approval.args, key="call:k", action_hash="h", holder="w", lease=30)
        assert refused.value.code is ErrorCode.RECEIPT_UNAVAILABLE and "signing key" in str(refused.value)
        assert await store.ledger.get("call:k") is None  # nothing claimed: the approval runs once a key signs
