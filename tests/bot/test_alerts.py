"""Alerts per tool and tier (hitl.yaml ``alerts:``), on both stores: a threshold crossed is announced once across
replicas (an audit entry, a post to the alerts channel, a webhook event ``alert.fired``), and once more when it
resolves; the Prometheus rules shipped beside the dashboard name only exported metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from hitl.engine.config.api import EventKind, WebhookSpec
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.alerts import AlertsSpec, evaluate
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.tally import TallyRow
from hitl.engine.runtime.alerts import AlertWatch
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.subscribers.events import WEBHOOK_JOB, Outbox
from hitl.testing import FakeClock
from tests.bot.conftest import CONFIG, Harness, start, stop
from tests.refund_config import write_refund_config

RULES = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "hitl-alerts.yml"
ALERTS = """
alerts:
  channel: "#general"
  window: 24h
  rules:
    - name: refunds_corrected
      figure: correction_rate
      above: 0.5
      tools: [refund]
      min_count: 2
      reason: Reviewers keep correcting refunds; check the agent's prompt.
    - name: waiting_too_long
      figure: oldest_pending
      above: 7200
"""


def test_alert_rules_read_the_figures_per_tool_and_tier(tmp_path: Path) -> None:
    spec = load_config(write_refund_config(tmp_path / "alerts.yaml", CONFIG.read_text() + ALERTS)).alerts
    rows = [
        TallyRow("refund", "approve", {"asked": 3, "rejected": 2, "approved": 1}),
        TallyRow("send_email", "notify", {"autonomous": 10}),
    ]
    readings = {r.rule.name: r for r in evaluate(spec, rows, {("refund", "approve"): 60.0})}
    assert readings["refunds_corrected"].firing and readings["refunds_corrected"].value == pytest.approx(2 / 3)
    assert readings["refunds_corrected"].describe() == "correction_rate 0.67 > 0.5 (refund)"
    assert not readings["waiting_too_long"].firing and readings["waiting_too_long"].value == 60.0
    practice = AlertsSpec.model_validate(
        {
            "rules": [
                {"name": "rubber_stamping", "figure": "catch_rate", "below": 0.5, "min_count": 2},
                {"name": "spot_flags", "figure": "audit_yield", "above": 0.2, "min_count": 2},
            ]
        }
    )
    counts = {"practice_caught": 1.0, "practice_missed": 3.0, "spot_checked": 4.0, "spot_flagged": 2.0}
    low, flags = evaluate(practice, [TallyRow("refund", "approve", counts)], {})
    assert (low.value, low.firing, flags.value, flags.firing) == (0.25, True, 0.5, True)
    few = evaluate(spec, [TallyRow("refund", "approve", {"rejected": 1})], {})
    assert few[0].value is None and not few[0].firing  # one decision is not enough to judge
    with pytest.raises(ValidationError, match="exactly one of above: or below:"):
        AlertsSpec.model_validate({"rules": [{"name": "x", "figure": "correction_rate"}]})
    with pytest.raises(ValidationError, match="unique"):
        AlertsSpec.model_validate({"rules": [{"name": "x", "figure": "latency_p90", "above": 1}] * 2})


async def test_a_crossed_threshold_is_announced_once_across_replicas_and_resolves_once(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, harness: Harness
) -> None:
    config = tmp_path / "alerts.yaml"
    write_refund_config(config, CONFIG.read_text() + ALERTS)
    spec = load_config(config).alerts
    store = harness.rt.store
    svc = harness.svc
    hook = WebhookSpec(
        url="http://127.0.0.1:9/hook",
        secret_env="HOOK_SECRET",
        events=[EventKind.ALERT_FIRED, EventKind.ALERT_RESOLVED],
    )
    posted: list[str] = []

    async def post(text: str) -> None:
        posted.append(text)

    replicas = [
        AlertWatch(store, clock, spec, holder=f"r{i}", events=Outbox(store, clock, [hook], holder=f"r{i}"), post=post)
        for i in (1, 2)
    ]

    async def decide(kind: DecisionKind, amount: int) -> None:
        args = {"order_id": f"o{amount}", "customer_id": "C-9", "amount": amount, "reason": "x"}
        p = await svc.propose(ProposeRequest("refund", args, session_id=f"s{amount}"))
        await svc.decide(
            DecideRequest(p.approval.id, "U_SUPPORT1", kind, reason="no" if kind is DecisionKind.REJECT else None)
        )

    await decide(DecisionKind.REJECT, 11)
    await decide(DecisionKind.REJECT, 12)
    await store.tallies.flush()
    for _ in range(2):
        for r in replicas:
            await r.sweep()
    assert posted == [
        "🚨 Alert fired: refunds_corrected. correction_rate 1.00 > 0.5 (refund)\nReviewers keep correcting refunds; "
        "check the agent's prompt.".replace("🚨", ":rotating_light:")
    ]
    for n in range(13, 17):
        await decide(DecisionKind.APPROVE, n)
    await store.tallies.flush()
    for r in replicas:
        await r.sweep()
    assert len(posted) == 2 and posted[1].startswith(":white_check_mark: Alert resolved: refunds_corrected.")
    jobs = await store.jobs.claim("test", kind=WEBHOOK_JOB, limit=50, now=clock.now(), lease=60.0)
    kinds = [j.payload["event"]["type"] for j in jobs]
    assert kinds == ["alert.fired", "alert.resolved"]
    trail = [e.event for e in await store.audit.entries(limit=2000) if e.event.startswith("alert_")]
    assert trail == ["alert_fired", "alert_resolved"]


async def test_hitl_serve_posts_a_fired_alert_to_the_alerts_channel(tmp_path: Path, clock: FakeClock) -> None:
    config = tmp_path / "alerts.yaml"
    write_refund_config(config, CONFIG.read_text() + ALERTS)
    served = await start(SqliteStore(tmp_path / "served.db"), clock, config=config)
    try:
        for n in (17, 18, 19):
            args = {"order_id": f"o{n}", "customer_id": "C-9", "amount": n, "reason": "x"}
            p = await served.svc.propose(ProposeRequest("refund", args, session_id=f"s{n}"))
            await served.svc.decide(DecideRequest(p.approval.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no"))
        await served.rt.store.tallies.flush()
        await served.rt.background.tick()  # one round of hitl serve's background work, its sweeps included
        [alert] = [m for m in served.cards("general") if "Alert fired" in m.text]
        assert "refunds_corrected" in alert.text and "correction_rate 1.00 > 0.5 (refund)" in alert.text
    finally:
        await stop(served)


def test_the_prometheus_rules_name_only_exported_metrics() -> None:
    from hitl.bot.metrics import HITL_METRICS

    exported = {*HITL_METRICS, "hitl_background_up", "hitl_background_outages", "hitl_slack_calls"}
    rules: list[dict[str, Any]] = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert rules and all({"alert", "expr", "labels", "annotations"} <= set(r) for r in rules)
    named = {m for r in rules for m in re.findall(r"\bhitl_[a-z_]+", r["expr"])}
    families = {re.sub(r"_(bucket|sum|count|total)$", "", m) for m in named}
    assert families and families <= exported, families - exported
