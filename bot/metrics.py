"""Prometheus metrics for ``GET /metrics`` (one registry per app, no globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from engine.domain.models import Approval, DecisionKind

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requested = Counter(
            "hitl_approvals_requested", "Approvals requested", ["tool", "tier"], registry=self.registry
        )
        self.decisions = Counter("hitl_decisions", "Decisions recorded", ["kind"], registry=self.registry)
        self.refusals = Counter("hitl_refusals", "Decisions refused", ["code"], registry=self.registry)
        self.time_to_decision = Histogram(
            "hitl_time_to_decision_seconds",
            "From request to a final decision",
            registry=self.registry,
            buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600),
        )
        self.correction_rate = Gauge(
            "hitl_correction_rate", "Share of decisions that modified or rejected", registry=self.registry
        )
        self.slack_calls = Counter(
            "hitl_slack_calls", "Slack Web API calls", ["method", "outcome"], registry=self.registry
        )
        self._total = 0
        self._corrected = 0

    def approval_requested(self, a: Approval) -> None:
        self.requested.labels(tool=a.tool, tier=str(a.tier)).inc()

    def decided(self, a: Approval, kind: DecisionKind, now: float) -> None:
        self.decisions.labels(kind=str(kind)).inc()
        self._total += 1
        if kind in (DecisionKind.MODIFY, DecisionKind.REJECT):
            self._corrected += 1
        self.correction_rate.set(self._corrected / self._total)
        if not a.is_open:
            self.time_to_decision.observe(max(0.0, now - a.created_at))

    def render(self) -> bytes:
        return generate_latest(self.registry)
