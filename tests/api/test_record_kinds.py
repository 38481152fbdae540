"""Record kinds live apart by construction: a caller's tool may not wear the prefix of one of hitl's own approvals
(an effect in doubt, a review gate, a spot check, a practice copy), so no proposal renders as one of them; an alert's
state lives where no run a caller names can reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.engine.domain.models import RESERVED_PREFIXES, DecisionKind
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.runtime.alerts import AlertWatch
from hitl.testing import FakeClock
from tests.api.conftest import shop_api


async def test_a_tool_named_like_hitls_own_approvals_is_a_422(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch) as api:
        for i, prefix in enumerate(RESERVED_PREFIXES):
            body = {"session": "s", "tool": f"{prefix}pay", "args": {"amount": 1}, "idempotency_key": f"k{i}"}
            status, problem = await api.call("POST", "/proposals", as_="agent", json=body)
            assert status == 422 and problem["error"]["code"] == "invalid_input", (prefix, problem)
            assert "keeps for its own approvals" in problem["error"]["message"]
        status, listed = await api.call("GET", "/approvals?status=any", as_="admin")
        assert listed["items"] == []
        assert api.h.cards() == []  # no card titled "Did it happen?", no Send feedback button


ALERTS = """
alerts:
  window: 24h
  rules:
    - {name: stale, figure: correction_rate, above: 0.5, tools: [refund], min_count: 2}
"""


async def test_a_run_named_like_an_alert_and_the_alert_stay_apart(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch, extra=ALERTS) as api:
        run = {"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}, "session_id": "alert:stale"}
        status, started = await api.call("POST", "/runs", as_="agent", json=run)
        assert status in (200, 201) and started["status"] == "paused", started
        svc, store = api.h.svc, api.h.rt.runtime.store
        for n in (1, 2):  # two corrections: the alert fires
            args = {"order_id": f"o{n}", "customer_id": "C-9", "amount": 10 + n}
            p = await svc.propose(ProposeRequest("refund", args, session_id=f"s{n}"))
            assert p.approval is not None
            await svc.decide(DecideRequest(p.approval.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no"))
        await store.tallies.flush()
        spec = api.h.rt.runtime.contexts.default.config.alerts
        await AlertWatch(store, api.h.clock, spec, holder="test").sweep()
        alert = await store.alerts.load("stale")
        assert alert is not None and alert.data["status"] == "firing"
        status, shown = await api.call("GET", "/runs/alert:stale", as_="agent")
        assert status == 200 and shown["status"] == "paused"  # the caller's run, untouched by the alert
        status, problem = await api.call("GET", "/runs/stale", as_="agent")
        assert status == 404 and problem["error"]["code"] == "not_found"  # an alert is never read as a run
