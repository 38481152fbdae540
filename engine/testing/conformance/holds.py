"""Conformance for holds on a kind of call (Slack's ``Retry-After``, shared by every replica).

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import asyncio

from hitl.engine.clocks import FakeClock
from hitl.engine.ports import Store

__all__ = ["HoldsConformance"]


class HoldsConformance:
    """What every store must do here."""

    async def test_a_hold_runs_until_its_end_and_a_later_one_stands(self, store: Store, clock: FakeClock) -> None:
        now = clock.now()
        assert await store.holds.active(now=now) == {}
        await store.holds.hold("chat.postMessage:C1", until=now + 30)
        await store.holds.hold("chat.update", until=now + 1.5)
        await store.holds.hold("chat.postMessage:C1", until=now + 2)  # an earlier end: the later hold stands
        assert await store.holds.active(now=now) == {"chat.postMessage:C1": now + 30, "chat.update": now + 1.5}
        assert await store.holds.active(now=now + 1.5) == {"chat.postMessage:C1": now + 30}  # ended at its end
        await store.holds.hold("chat.update", until=now + 10)  # held again after it ended
        assert await store.holds.active(now=now + 2) == {"chat.postMessage:C1": now + 30, "chat.update": now + 10}
        assert await store.holds.active(now=now + 31) == {}

    async def test_concurrent_holds_keep_the_latest_end(self, store: Store, clock: FakeClock) -> None:
        now = clock.now()
        ends = [now + s for s in (3, 9, 1, 7, 5)]
        await asyncio.gather(*(store.holds.hold("views.publish", until=end) for end in ends))
        assert await store.holds.active(now=now) == {"views.publish": now + 9}
