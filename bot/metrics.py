"""Prometheus metrics for ``GET /metrics`` (one registry per app, no globals).

Two kinds. The HITL metrics (actions by outcome, autonomous completion, corrections, intervention latency, each
per tool and tier) are computed from the store's counts (:mod:`hitl.engine.domain.tally`) over a rolling window, so
every replica reports the same figures and a restart loses none: the background loop refreshes them (a sweep).
This process's own work (decisions it recorded, refusals, Slack calls) stays in ordinary counters.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from hitl.engine.config.deprecations import RENAMED
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.tally import CONSEQUENCE_OUTCOMES, Outcome, TallyRow, summarize
from hitl.engine.ports import Clock, Store
from hitl.engine.process.tasks import Outages

__all__ = ["HITL_METRICS", "Metrics", "OutageMetrics", "StoreMetrics"]

HITL_METRICS = (
    "hitl_actions",
    "hitl_autonomous_completion_ratio",
    "hitl_correction_ratio",
    "hitl_intervention_latency_seconds",
    "hitl_audit_yield_ratio",
    "hitl_practice_catch_ratio",
    "hitl_first_interaction_seconds",
    "hitl_consequence_seconds",
    "hitl_consequences",
)
"""The store-computed metric families (the Grafana dashboard in ``docs/grafana/`` queries these)."""


class StoreMetrics(Collector):
    """The HITL metrics over the last ``window`` seconds, as last read from the store by :meth:`refresh`."""

    def __init__(self, store: Store | None = None, clock: Clock | None = None, *, window: float = 7 * 86400) -> None:
        self.store = store
        self.clock = clock
        self.window = window
        self.every = 15.0
        self.rows: list[TallyRow] = []
        self._read_at = -1e18

    async def sweep(self) -> None:
        """Read the counts again when ``every`` seconds passed (a background sweep)."""
        if self.store is None or self.clock is None or self.clock.now() - self._read_at < self.every:
            return
        await self.refresh()

    async def refresh(self) -> None:
        assert self.store is not None and self.clock is not None
        now = self.clock.now()
        await self.store.tallies.flush()  # this process's held counts first
        self.rows = summarize(await self.store.tallies.read(since=now - self.window, now=now))
        self._read_at = now

    def collect(self) -> Iterator[Metric]:
        labels = ["tool", "tier"]
        days = f"{self.window / 86400:g} days"
        actions = GaugeMetricFamily(
            "hitl_actions", f"Actions proposed in the last {days}, by outcome", labels=[*labels, "outcome"]
        )
        autonomous = GaugeMetricFamily(
            "hitl_autonomous_completion_ratio", f"Share of actions that ran without a person ({days})", labels=labels
        )
        corrected = GaugeMetricFamily(
            "hitl_correction_ratio", f"Share of human decisions that modified or rejected ({days})", labels=labels
        )
        latency = HistogramMetricFamily(
            "hitl_intervention_latency_seconds",
            f"From the request to the final human decision ({days}; read it without rate())",
            labels=labels,
        )
        first = HistogramMetricFamily(
            "hitl_first_interaction_seconds",
            f"From the request to its first interaction: a button, a view opened, /hitl show ({days}; the tier is "
            "the rank band; read it without rate())",
            labels=labels,
        )
        audit_yield = GaugeMetricFamily(
            "hitl_audit_yield_ratio", f"Share of spot checks reviewers flagged ({days})", labels=labels
        )
        catches = GaugeMetricFamily(
            "hitl_practice_catch_ratio",
            f"Share of decided practice approvals whose planted defect was caught ({days})",
            labels=labels,
        )
        took = HistogramMetricFamily(
            "hitl_consequence_seconds",
            f"Time to compute a tool's consequence before its approval is asked ({days}; read it without rate())",
            labels=labels,
        )
        ended = GaugeMetricFamily(
            "hitl_consequences",
            f"Tools' consequences computed in the last {days}, by how they ended (shown, busy, timed_out, failed)",
            labels=[*labels, "outcome"],
        )
        renamed = RENAMED["hitl_seeded_catch_ratio"]
        # The old name stays exported for one release, so a dashboard that reads it keeps working meanwhile.
        old_catches = GaugeMetricFamily(renamed.old, f"Deprecated: {renamed.message()}", labels=labels)
        for r in self.rows:
            if r.audit_yield is not None:
                audit_yield.add_metric([r.tool, r.tier], r.audit_yield)
            if r.catch_rate is not None:
                catches.add_metric([r.tool, r.tier], r.catch_rate)
                old_catches.add_metric([r.tool, r.tier], r.catch_rate)
            for outcome in Outcome:
                actions.add_metric([r.tool, r.tier, str(outcome)], r.n(outcome))
            if r.autonomous_rate is not None:
                autonomous.add_metric([r.tool, r.tier], r.autonomous_rate)
            if r.correction_rate is not None:
                corrected.add_metric([r.tool, r.tier], r.correction_rate)
            if r.latency_count:
                buckets = [("+Inf" if b == float("inf") else f"{b:g}", float(n)) for b, n in r.latency_buckets]
                latency.add_metric([r.tool, r.tier], buckets, sum_value=r.latency_sum)
            seen = r.buckets("first")
            if seen[-1][1]:
                drawn = [("+Inf" if b == float("inf") else f"{b:g}", float(n)) for b, n in seen]
                first.add_metric([r.tool, r.tier], drawn, sum_value=r.counts.get("first_sum", 0.0))
            computed = r.buckets("consequence")
            if computed[-1][1]:  # only the tools that declare one
                drawn = [("+Inf" if b == float("inf") else f"{b:g}", float(n)) for b, n in computed]
                took.add_metric([r.tool, r.tier], drawn, sum_value=r.counts.get("consequence_sum", 0.0))
                for how in CONSEQUENCE_OUTCOMES:
                    ended.add_metric([r.tool, r.tier, how], r.consequences[how])
        yield from (actions, autonomous, corrected, latency, first, took, ended, audit_yield, catches, old_catches)


class OutageMetrics(Collector):
    """This process's background loops: outages they met (``hitl_background_outages_total``) and whether each works
    now (``hitl_background_up``), by loop."""

    def __init__(self) -> None:
        self.watched: list[Outages] = []

    def collect(self) -> Iterator[Metric]:
        started = CounterMetricFamily(
            "hitl_background_outages", "Outages of this process's background work (the store away)", labels=["loop"]
        )
        up = GaugeMetricFamily(
            "hitl_background_up", "1 while the loop's rounds work, 0 during an outage", labels=["loop"]
        )
        for o in self.watched:
            started.add_metric([o.name], o.started)
            up.add_metric([o.name], 0 if o.down else 1)
        yield started
        yield up


class Metrics:
    """The bot's registry: the store-computed HITL metrics and this process's own counters."""

    def __init__(self, store: Store | None = None, clock: Clock | None = None) -> None:
        self.registry = CollectorRegistry()
        self.hitl = StoreMetrics(store, clock)
        self.registry.register(self.hitl)
        self.outages = OutageMetrics()
        """Background loops register their :class:`~hitl.engine.process.tasks.Outages` here (``watch``)."""
        self.registry.register(self.outages)
        self.requested = Counter(
            "hitl_approvals_requested",
            "Approval cards posted by this process",
            ["tool", "tier"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "hitl_decisions", "Decisions recorded by this process", ["kind"], registry=self.registry
        )
        self.refusals = Counter("hitl_refusals", "Decisions refused", ["code"], registry=self.registry)
        self.slack_calls = Counter(
            "hitl_slack_calls", "Slack Web API calls", ["method", "outcome"], registry=self.registry
        )
        self.cards = Counter(
            "hitl_cards",
            "Approval cards handed to Slack, per approval, by outcome (posted, Slack's error code, unreachable)",
            ["outcome"],
            registry=self.registry,
        )

    def watch(self, outages: Outages) -> None:
        """Report a background loop's outages in ``/metrics``."""
        self.outages.watched.append(outages)

    def approval_requested(self, a: Approval) -> None:
        self.requested.labels(tool=a.tool, tier=str(a.tier)).inc()

    def decided(self, a: Approval, kind: DecisionKind, now: float) -> None:
        self.decisions.labels(kind=str(kind)).inc()

    async def sweep(self) -> None:
        await self.hitl.sweep()
