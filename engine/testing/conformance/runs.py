"""Conformance for run checkpoints: compare-and-swap, the paused index.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from engine.errors import EngineError, ErrorCode
from engine.ports import Store
from engine.testing.clock import FakeClock

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
        assert await store.runs.load("run1") == ({"step": 2}, 2)
        await store.runs.save("run2", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.runs.save("run3", {"status": "paused"}, expected_version=0, now=clock.now())
        await store.runs.save("run3", {"status": "paused", "x": 1}, expected_version=1, now=clock.now())
        assert sorted(await store.runs.paused()) == ["run2", "run3"]
        await store.runs.save("run2", {"status": "completed"}, expected_version=1, now=clock.now())
        assert await store.runs.paused() == ["run3"]
