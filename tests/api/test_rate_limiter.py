"""The API's rate limiter keeps a bounded number of buckets, however many addresses or tokens call."""

from __future__ import annotations

from hitl.api.limits import RateLimiter
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
