"""Conformance for the execution ledger: one claimant per key, recovery, fencing.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.records import ClaimState
from hitl.engine.errors import ClaimRefused, ErrorCode
from hitl.engine.ports import Store

__all__ = ["LedgerConformance"]


class LedgerConformance:
    """What every store must do here."""

    async def test_50_concurrent_claimants_one_wins_and_retry_replays(self, store: Store, clock: FakeClock) -> None:
        results = await asyncio.gather(
            *(
                store.ledger.claim("idem-1", action_hash="h1", holder=f"w{i}", now=clock.now(), lease=30)
                for i in range(50)
            ),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException) and r.acquired]
        refused = [r for r in results if isinstance(r, ClaimRefused)]
        assert len(won) == 1 and len(refused) == 49
        assert all(r.code is ErrorCode.CLAIM_IN_PROGRESS for r in refused)
        w = won[0]
        done = await store.ledger.record_outcome(
            "idem-1",
            holder=w.holder,
            attempt=w.attempt,
            ok=True,
            result={"refund_id": "R-1"},
            now=clock.now(),
        )
        assert done.state is ClaimState.SUCCEEDED
        replay = await store.ledger.claim("idem-1", action_hash="h1", holder="late", now=clock.now(), lease=30)
        assert not replay.acquired and replay.result == {"refund_id": "R-1"} and replay.holder == w.holder
        with pytest.raises(ClaimRefused) as err:
            await store.ledger.claim("idem-1", action_hash="other", holder="x", now=clock.now(), lease=30)
        assert err.value.code is ErrorCode.CLAIM_HASH_MISMATCH

    async def test_dead_holder_is_recovered_once_and_fenced(self, store: Store, clock: FakeClock) -> None:
        first = await store.ledger.claim("idem-2", action_hash="h", holder="dead", now=clock.now(), lease=30)
        assert first.acquired and first.attempt == 1
        clock.advance(31)
        results = await asyncio.gather(
            *(
                store.ledger.claim("idem-2", action_hash="h", holder=f"r{i}", now=clock.now(), lease=30)
                for i in range(20)
            ),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException) and r.acquired]
        assert len(won) == 1 and won[0].attempt == 2 and won[0].recovered
        with pytest.raises(ClaimRefused) as err:
            await store.ledger.record_outcome("idem-2", holder="dead", attempt=1, ok=True, result={}, now=clock.now())
        assert err.value.code is ErrorCode.CLAIM_FENCED
        out = await store.ledger.record_outcome(
            "idem-2", holder=won[0].holder, attempt=2, ok=False, result={"error": "x"}, now=clock.now()
        )
        assert out.state is ClaimState.FAILED
        assert not (await store.ledger.claim("idem-2", action_hash="h", holder="z", now=clock.now(), lease=30)).acquired
        retry = await store.ledger.claim(
            "idem-2", action_hash="h", holder="z", now=clock.now(), lease=30, retry_failed=True
        )
        assert retry.acquired and retry.attempt == 3 and not retry.recovered
        assert (await store.ledger.get("idem-2")) is not None and await store.ledger.get("nope") is None

    async def test_a_live_holder_renews_its_lease_and_only_it(self, store: Store, clock: FakeClock) -> None:
        first = await store.ledger.claim("idem-3", action_hash="h", holder="slow", now=clock.now(), lease=10)
        clock.advance(8)
        assert await store.ledger.renew("idem-3", holder="slow", attempt=1, now=clock.now(), lease=10)
        assert not await store.ledger.renew("idem-3", holder="other", attempt=1, now=clock.now(), lease=10)
        assert not await store.ledger.renew("idem-3", holder="slow", attempt=2, now=clock.now(), lease=10)
        clock.advance(8)  # past the first lease, inside the renewed one: nobody may take over
        with pytest.raises(ClaimRefused) as err:
            await store.ledger.claim("idem-3", action_hash="h", holder="other", now=clock.now(), lease=10)
        assert err.value.code is ErrorCode.CLAIM_IN_PROGRESS
        await store.ledger.record_outcome(
            "idem-3", holder="slow", attempt=first.attempt, ok=True, result={"x": 1}, now=clock.now()
        )
        assert not await store.ledger.renew("idem-3", holder="slow", attempt=1, now=clock.now(), lease=10)
