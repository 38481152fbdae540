"""Conformance for alert states: saved compare-and-swap, in a space no run (or any id a caller chooses) reaches.

Subclass it and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.errors import StaleVersion
from hitl.engine.ports import Store

__all__ = ["AlertsConformance"]


class AlertsConformance:
    """What every store must do here."""

    async def test_an_alert_state_is_saved_compare_and_swap(self, store: Store, clock: FakeClock) -> None:
        assert await store.alerts.load("stale") is None
        first = await store.alerts.save("stale", {"status": "firing", "episode": 1}, expected_version=0, now=1.0)
        assert first == 1
        with pytest.raises(StaleVersion):  # another replica saved first
            await store.alerts.save("stale", {"status": "ok"}, expected_version=0, now=2.0)
        assert await store.alerts.save("stale", {"status": "ok", "episode": 1}, expected_version=1, now=3.0) == 2
        found = await store.alerts.load("stale")
        assert found is not None and (found.data, found.version) == ({"status": "ok", "episode": 1}, 2)

    async def test_runs_and_alerts_never_reach_each_other(self, store: Store, clock: FakeClock) -> None:
        # A caller may name a run (a session) anything, the old alert record's name included.
        for name in ("alert:stale", "stale"):
            await store.runs.save(name, {"status": "paused", "mine": name}, expected_version=0, now=clock.now())
        await store.alerts.save("stale", {"kind": "alert", "status": "firing"}, expected_version=0, now=clock.now())
        for name in ("alert:stale", "stale"):
            found = await store.runs.load(name)
            assert found is not None and found.data == {"status": "paused", "mine": name}
        alert = await store.alerts.load("stale")
        assert alert is not None and alert.data == {"kind": "alert", "status": "firing"}
        assert await store.alerts.load("alert:stale") is None
