"""Conformance for run checkpoints: compare-and-swap, the paused index.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.runs import StoredRun
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.ports import Store

__all__ = ["RunsConformance"]


class RunsConformance:
    """What every store must do here."""

    async def test_checkpoints_are_compare_and_swap(self, store: Store, clock: FakeClock) -> None:
        assert await store.runs.load("run1") is None
        v1 = await store.runs.save("run1", {"step": 1, "x": 1.5}, expected_version=0, now=clock.now())
        assert v1 == 1
        with pytest.raises(EngineError) as err:
            await store.runs.save("run1", {"step": 9}, expected_version=0, now=clock.now())
        assert err.value.code is ErrorCode.STALE_VERSION
        assert await store.runs.save("run1", {"step": 2}, expected_version=1, now=clock.now()) == 2
        assert await store.runs.load("run1") == StoredRun({"step": 2}, 2)
        await store.runs.save("run2", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.runs.save("run3", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.runs.save("run3", {"status": "paused", "x": 1}, expected_version=1, now=clock.now())
        assert sorted(await store.runs.paused()) == ["run2", "run3"]
        await store.runs.save("run2", {"status": "completed"}, expected_version=1, now=clock.now())
        assert await store.runs.paused() == ["run3"]

    async def test_paused_runs_page_through_everything(self, store: Store, clock: FakeClock) -> None:
        ids = [f"run-{i:03d}" for i in range(25)]
        for run_id in ids:
            await store.runs.save(run_id, {"status": "paused"}, expected_version=0, now=clock.advance(1))
        await store.runs.save("run-007", {"status": "completed"}, expected_version=1, now=clock.now())
        seen: list[str] = []
        after: str | None = None
        while page := await store.runs.paused(limit=10, after=after):
            seen += page
            after = page[-1]
        assert seen == [i for i in ids if i != "run-007"]

    async def test_one_owner_at_a_time_and_orphans_are_found(self, store: Store, clock: FakeClock) -> None:
        await store.runs.save("r1", {"status": "running"}, expected_version=0, now=clock.now())
        assert await store.runs.own("r1", holder="w1", now=clock.now(), lease=5)
        assert await store.runs.own("r1", holder="w1", now=clock.now(), lease=5)  # keeping it is fine
        assert not await store.runs.own("r1", holder="w2", now=clock.now(), lease=5)
        assert await store.runs.orphaned(now=clock.now()) == []
        clock.advance(4)
        assert await store.runs.renew("r1", holder="w1", now=clock.now(), lease=5)
        assert not await store.runs.renew("r1", holder="w2", now=clock.now(), lease=5)
        clock.advance(4)  # past the first lease, inside the renewed one
        assert not await store.runs.own("r1", holder="w2", now=clock.now(), lease=5)
        assert await store.runs.orphaned(now=clock.now()) == []
        clock.advance(2)  # w1 stopped renewing: it died mid-run
        assert await store.runs.orphaned(now=clock.now()) == ["r1"]
        assert await store.runs.own("r1", holder="w2", now=clock.now(), lease=5)
        assert not await store.runs.renew("r1", holder="w1", now=clock.now(), lease=5)  # the old owner is out
        assert await store.runs.orphaned(now=clock.now()) == []
        # A run that paused or ended is never an orphan, owned or not.
        await store.runs.save("r1", {"status": "paused"}, expected_version=1, now=clock.now())
        await store.runs.release("r1", holder="w2")
        clock.advance(60)
        assert await store.runs.orphaned(now=clock.now()) == []
        # A running run nobody ever owned (its starter died before taking the lease) is an orphan too.
        await store.runs.save("r2", {"status": "running"}, expected_version=0, now=clock.now())
        assert await store.runs.own("r2", holder="w3", now=clock.now(), lease=5)
        await store.runs.release("r2", holder="w3")
        assert await store.runs.orphaned(now=clock.now()) == ["r2"]
