"""Conformance for the metric counts.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.tally import Outcome, counts_for, summarize
from hitl.engine.ports import Store

__all__ = ["TalliesConformance"]


class TalliesConformance:
    """What every store must do here."""

    async def test_counts_add_up_across_hours_and_are_read_by_period(self, store: Store, clock: FakeClock) -> None:
        start = clock.now()
        await store.tallies.add(counts_for("refund", "approve", Outcome.ASKED, now=start), now=start)
        await store.tallies.add(counts_for("refund", "approve", Outcome.ASKED, now=start), now=start)
        clock.advance(7200)  # two hours later: held counts of another hour join the same write
        later = clock.now()
        await store.tallies.add(counts_for("refund", "approve", Outcome.MODIFIED, now=later, latency=90), now=later)
        await store.tallies.add(counts_for("lookup", "auto", Outcome.AUTONOMOUS, now=later), now=later)
        await store.tallies.flush()
        await store.tallies.flush()  # nothing held: nothing written twice
        rows = summarize(await store.tallies.read(since=start, now=later))
        assert [(r.tool, r.tier, r.actions, r.decided) for r in rows] == [
            ("lookup", "auto", 1, 0),
            ("refund", "approve", 2, 1),
        ]
        refund = rows[1]
        assert refund.correction_rate == 1.0 and refund.latency_sum == 90.0
        assert refund.latency_quantile(0.5) == 300  # 90 s falls in the 5-minute bucket
        only_later = summarize(await store.tallies.read(since=later, now=later))
        assert [(r.tool, r.n(Outcome.ASKED)) for r in only_later] == [("lookup", 0), ("refund", 0)]

    async def test_held_counts_are_written_by_time_or_on_close(self, store: Store, clock: FakeClock) -> None:
        now = clock.now()
        await store.tallies.add(counts_for("ping", "notify", Outcome.AUTONOMOUS, now=now), now=now)
        assert await store.tallies.read(since=now, now=now) == {}  # held: not on the fast path's round trip
        clock.advance(6)
        await store.tallies.add(counts_for("ping", "notify", Outcome.AUTONOMOUS, now=clock.now()), now=clock.now())
        assert await store.tallies.read(since=now, now=clock.now()) == {("ping", "notify", "autonomous"): 2.0}
