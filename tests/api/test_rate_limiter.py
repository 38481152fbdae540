"""The API's rate limiter keeps a bounded number of buckets, however many addresses or tokens call."""

from __future__ import annotations

from pathlib import Path

from hitl.api.limits import RateLimiter
from hitl.api.unauthenticated import ANONYMOUS, Unauthenticated
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock


def test_buckets_stay_bounded_and_a_busy_key_keeps_its_limit() -> None:
    clock = FakeClock()
    limiter = RateLimiter(now=clock.now, max_keys=100)
    for _ in range(3):  # one busy address spends its burst
        assert limiter.take("busy", rate=1.0, burst=3) == 0.0
    assert limiter.take("busy", rate=1.0, burst=3) > 0  # and is limited
    for i in range(10_000):  # a crowd of addresses, one request each
        limiter.take(f"10.0.{i // 256}.{i % 256}", rate=1.0, burst=3)
        assert limiter.size <= 100
    clock.advance(0.5)
    # The busy address was not among the newest 100: its bucket was dropped, so it starts afresh with a full burst.
    assert limiter.take("busy", rate=1.0, burst=3) == 0.0
    clock.advance(10)  # everyone refilled: a full bucket is the same as none, and is dropped first
    for i in range(150):
        limiter.take(f"later-{i}", rate=1.0, burst=3)
    assert limiter.size <= 100
    assert [limiter.take("later-149", rate=1.0, burst=3) > 0 for _ in range(3)] == [False, False, True]  # its limit


def test_the_limit_itself_is_unchanged() -> None:
    clock = FakeClock()
    limiter = RateLimiter(now=clock.now)
    assert [limiter.take("t", rate=2.0, burst=2) for _ in range(3)] == [0.0, 0.0, 0.5]
    clock.advance(0.5)
    assert limiter.take("t", rate=2.0, burst=2) == 0.0


async def test_refusals_from_a_crowd_of_addresses_are_counted_in_bounded_memory(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "u.db")
    clock = FakeClock()
    refusals = Unauthenticated(store, clock, rate=1.0, burst=1, limiter=RateLimiter(now=clock.now), max_held=50)
    try:
        for _ in range(3):  # each address: one entry, then held past its rate
            for n in range(200):
                await refusals.refused(surface="api", address=f"10.0.0.{n}", what="GET /approvals")
        entries = [e for e in await store.audit.entries(limit=10_000) if e.actor == ANONYMOUS]
        counted = 0
        for e in entries:
            if "addresses" in e.detail:
                counted += int(e.detail.split(" requests")[0])
            else:
                counted += 1 + (int(e.detail.split("(and ")[1].split(" more")[0]) if "(and " in e.detail else 0)
        held = sum(refusals.held("api", f"10.0.0.{n}") for n in range(200))
        assert counted + held == 600  # every refusal is in the trail or still held, none lost
        assert refusals.holding <= 50 and any("addresses" in e.detail for e in entries)
    finally:
        await store.close()
