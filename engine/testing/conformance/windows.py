"""Conformance for rolling windows.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.ports import Store

__all__ = ["WindowsConformance"]


class WindowsConformance:
    """What every store must do here."""

    async def test_rolling_windows_count_and_sum(self, store: Store, clock: FakeClock) -> None:
        key = "split:cust-1"
        for i in range(3):
            prior = await store.windows.add(key, amount=49.0, now=clock.advance(600), window=86400, event_id=f"e{i}")
            assert (prior.count, prior.total) == (i, 49.0 * i)
        stats = await store.windows.stats(key, now=clock.now(), window=86400)
        assert (stats.count, stats.total) == (3, 147.0)
        again = await store.windows.add(key, amount=49.0, now=clock.now(), window=86400, event_id="e2")
        assert (again.count, again.total) == (2, 98.0)  # re-adding an event neither counts it nor doubles it
        assert (await store.windows.stats(key, now=clock.now(), window=86400)).count == 3
        clock.advance(86400 - 1200 + 1)
        stats = await store.windows.stats(key, now=clock.now(), window=86400)
        assert (stats.count, stats.total) == (2, 98.0)

    async def test_an_event_can_be_forgotten_and_left_out(self, store: Store, clock: FakeClock) -> None:
        """An action that ended without running leaves its window; an edit is judged without its own first event."""
        key = "split:cust-2"
        for i, amount in enumerate((120.0, 899.0, 30.0)):
            await store.windows.add(key, amount=amount, now=clock.advance(60), window=86400, event_id=f"e{i}")
        stats = await store.windows.stats(key, now=clock.now(), window=86400, exclude="e1")
        assert (stats.count, stats.total) == (2, 150.0)
        await store.windows.forget(key, event_id="e1")
        await store.windows.forget(key, event_id="never-added")  # nothing there: nothing happens
        stats = await store.windows.stats(key, now=clock.now(), window=86400)
        assert (stats.count, stats.total) == (2, 150.0)
        again = await store.windows.add(key, amount=5.0, now=clock.now(), window=86400, event_id="e1")
        assert (again.count, again.total) == (2, 150.0)  # forgotten, so it can be counted anew

    async def test_an_event_counted_again_keeps_what_it_found_first(self, store: Store, clock: FakeClock) -> None:
        """The same call asked again is judged as it was first judged, whatever was counted after it, and is never
        added again (``added`` False: its event belongs to its first asking)."""
        key = "split:cust-3"
        first = await store.windows.add(key, amount=10.0, now=clock.advance(60), window=86400, event_id="e0")
        assert (first.count, first.total, first.added) == (0, 0.0, True)
        for i in (1, 2, 3):
            await store.windows.add(key, amount=10.0, now=clock.advance(60), window=86400, event_id=f"e{i}")
        again = await store.windows.add(key, amount=10.0, now=clock.advance(60), window=86400, event_id="e0")
        assert (again.count, again.total, again.added) == (0, 0.0, False)
        assert (await store.windows.stats(key, now=clock.now(), window=86400)).count == 4
        await store.windows.forget(key, event_id="e0")  # forgotten, it is counted anew, with what it finds now
        anew = await store.windows.add(key, amount=10.0, now=clock.now(), window=86400, event_id="e0")
        assert (anew.count, anew.total, anew.added) == (3, 30.0, True)
