"""What the HITL metrics are made of: counts per tool, tier and hour, kept in the store so that every replica and
every restart sees the same figures.

An action either runs on its own (``autonomous``: the policy's auto or notify tier) or is put to people
(``asked``), whose approval ends ``approved``, ``modified``, ``rejected`` or ``expired``. A decision's latency (from
the request to the final human decision) is counted into fixed buckets, so hours and replicas add up; so is the time
to an approval's first interaction (the first button pressed, view opened or ``/hitl show`` on it). The tier is the
rank band of :mod:`~hitl.engine.domain.ranking`: both times are read per band. A tool's consequence, computed
before a person is asked, counts how it ended and how long it took (:func:`consequence_counts`), in buckets of its
own: it is bounded in seconds, not hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CONSEQUENCE_BUCKETS",
    "CONSEQUENCE_OUTCOMES",
    "LATENCY_BUCKETS",
    "LEGACY_FIELDS",
    "Outcome",
    "TallyKey",
    "TallyRow",
    "consequence_counts",
    "counts_for",
    "decision_outcome",
    "first_seen_counts",
    "hour_of",
    "summarize",
]

LATENCY_BUCKETS: tuple[float, ...] = (60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 86400)
"""Upper bounds (seconds) of the latency buckets: a minute, 5 and 15 minutes, an hour, 4 hours, a day, a week."""

CONSEQUENCE_BUCKETS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 60)
"""Upper bounds (seconds) of a consequence's time buckets: its time bound is 2 s unless a tool sets it (at most 60)."""
CONSEQUENCE_OUTCOMES = ("shown", "busy", "timed_out", "failed")
"""How computing a consequence ends (:class:`~hitl.engine.domain.consequences.ConsequenceOutcome`), each counted as
``consequence_<outcome>``."""

TallyKey = tuple[int, str, str, str]
"""(hour since the epoch, tool, tier, field)."""


class Outcome(StrEnum):
    """How an action ended, as the oversight measures count it (per tool, tier and hour)."""

    AUTONOMOUS = "autonomous"
    ASKED = "asked"
    APPROVED = "approved"
    MODIFIED = "modified"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SPOT_CHECKED = "spot_checked"
    """An autonomous action put to reviewers after the fact (a spot check)."""
    SPOT_FLAGGED = "spot_flagged"
    """A spot check a reviewer flagged (it also counts as a rejection: a correction)."""
    PRACTICE = "practice"
    """A practice approval put to reviewers (a real one copied with a planted defect)."""
    PRACTICE_CAUGHT = "practice_caught"
    """A practice approval whose planted defect the reviewers caught (rejected or edited)."""
    PRACTICE_MISSED = "practice_missed"
    """A practice approval the reviewers approved: its planted defect was missed."""
    FLOODED = "flooded"
    """A proposal refused because a cap on approvals was full (``approval_flood``)."""
    HANDED_ON = "handed_on"
    """An unanswered approval handed on to its backup role before it expired."""
    UNDER_DELEGATION = "under_delegation"
    """A decision (a vote, final or not) cast through a role a delegation handed to its reviewer."""


_DECIDED = {
    "approve": Outcome.APPROVED,
    "trust": Outcome.APPROVED,
    "modify": Outcome.MODIFIED,
    "reject": Outcome.REJECTED,
    "feedback": Outcome.REJECTED,
}
"""What a final decision counts as (feedback sends work back: a correction)."""


def decision_outcome(kind: str, status: str) -> Outcome | None:
    """What a decision of ``kind`` that left its approval in ``status`` counts as, or None while it is not final
    (a first vote of two). A superseding edit is a correction too."""
    return _DECIDED.get(str(kind)) if str(status) in ("approved", "rejected", "superseded") else None


def hour_of(ts: float) -> int:
    """The hour bucket (hours since the epoch) a timestamp counts in."""
    return int(ts // 3600)


def _bucket(latency: float, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> str:
    for bound in bounds:
        if latency <= bound:
            return f"le_{bound:g}"
    return "le_inf"


def counts_for(
    tool: str, tier: str, outcome: Outcome, *, now: float, latency: float | None = None
) -> dict[TallyKey, float]:
    """The counts one event adds (a decision's latency into its bucket, its sum and its count)."""
    hour = hour_of(now)
    out: dict[TallyKey, float] = {(hour, tool, tier, str(outcome)): 1.0}
    if latency is not None:
        latency = max(0.0, latency)
        out[(hour, tool, tier, f"latency_{_bucket(latency)}")] = 1.0
        out[(hour, tool, tier, "latency_sum")] = latency
    return out


def first_seen_counts(tool: str, tier: str, *, now: float, latency: float) -> dict[TallyKey, float]:
    """The counts an approval's first interaction adds: its time since the request, into its bucket and sum."""
    hour, latency = hour_of(now), max(0.0, latency)
    return {(hour, tool, tier, f"first_{_bucket(latency)}"): 1.0, (hour, tool, tier, "first_sum"): latency}


def consequence_counts(tool: str, tier: str, outcome: str, *, now: float, took: float) -> dict[TallyKey, float]:
    """The counts computing one consequence adds: how it ended, and its time into its bucket and sum."""
    hour, took = hour_of(now), max(0.0, took)
    return {
        (hour, tool, tier, f"consequence_{outcome}"): 1.0,
        (hour, tool, tier, f"consequence_{_bucket(took, CONSEQUENCE_BUCKETS)}"): 1.0,
        (hour, tool, tier, "consequence_sum"): took,
    }


@dataclass(frozen=True)
class TallyRow:
    """One tool at one tier over a period."""

    tool: str
    tier: str
    counts: dict[str, float] = field(default_factory=dict)

    def n(self, outcome: Outcome) -> int:
        return int(self.counts.get(str(outcome), 0))

    @property
    def actions(self) -> int:
        return self.n(Outcome.AUTONOMOUS) + self.n(Outcome.ASKED)

    @property
    def decided(self) -> int:
        return self.n(Outcome.APPROVED) + self.n(Outcome.MODIFIED) + self.n(Outcome.REJECTED)

    @property
    def autonomous_rate(self) -> float | None:
        """Share of actions that completed without a person (None: no actions)."""
        return self.n(Outcome.AUTONOMOUS) / self.actions if self.actions else None

    @property
    def correction_rate(self) -> float | None:
        """Share of human decisions that changed the action: modified or rejected (None: no decisions)."""
        corrected = self.n(Outcome.MODIFIED) + self.n(Outcome.REJECTED)
        return corrected / self.decided if self.decided else None

    @property
    def audit_yield(self) -> float | None:
        """Share of spot checks reviewers flagged: how often a look after the fact found something (None: none)."""
        checked = self.n(Outcome.SPOT_CHECKED)
        return self.n(Outcome.SPOT_FLAGGED) / checked if checked else None

    @property
    def catch_rate(self) -> float | None:
        """Share of decided practice approvals whose planted defect was caught (None: none decided)."""
        decided = self.n(Outcome.PRACTICE_CAUGHT) + self.n(Outcome.PRACTICE_MISSED)
        return self.n(Outcome.PRACTICE_CAUGHT) / decided if decided else None

    @property
    def latency_buckets(self) -> list[tuple[float, int]]:
        """(upper bound, decisions within it) per bucket, cumulative like a Prometheus histogram; the last bound
        is infinity."""
        return self.buckets("latency")

    @property
    def latency_count(self) -> int:
        return self.latency_buckets[-1][1]

    @property
    def latency_sum(self) -> float:
        return self.counts.get("latency_sum", 0.0)

    def latency_quantile(self, q: float) -> float | None:
        """The bucket bound below which ``q`` of the decisions fell (None: no decisions)."""
        return self.quantile("latency", q)

    @property
    def consequences(self) -> dict[str, int]:
        """How many of the tool's consequences ended each way (:data:`CONSEQUENCE_OUTCOMES`)."""
        return {o: int(self.counts.get(f"consequence_{o}", 0)) for o in CONSEQUENCE_OUTCOMES}

    def buckets(self, times: str) -> list[tuple[float, int]]:
        """The histogram of ``times`` (``latency``: to the decision; ``first``: to the first interaction;
        ``consequence``: computing the tool's consequence) as (upper bound, count within it), cumulative; the last
        bound is infinity."""
        out, total = [], 0
        for bound in (*(CONSEQUENCE_BUCKETS if times == "consequence" else LATENCY_BUCKETS), float("inf")):
            name = "le_inf" if bound == float("inf") else f"le_{bound:g}"
            total += int(self.counts.get(f"{times}_{name}", 0))
            out.append((bound, total))
        return out

    def quantile(self, times: str, q: float) -> float | None:
        """The bucket bound below which ``q`` of ``times`` fell (None: none counted)."""
        found = self.buckets(times)
        count = found[-1][1]
        if not count:
            return None
        return next(bound for bound, seen in found if seen >= q * count)


LEGACY_FIELDS = {
    "seeded": Outcome.PRACTICE,
    "seeded_caught": Outcome.PRACTICE_CAUGHT,
    "seeded_missed": Outcome.PRACTICE_MISSED,
}
"""Count fields hitl 0.1 stored under older names, read as today's: the hours counted then keep counting in the
same figures until retention drops them (no store rewrites its tallies)."""


def summarize(raw: Mapping[tuple[str, str, str], float]) -> list[TallyRow]:
    """Rows per (tool, tier) from summed (tool, tier, field) counts, sorted by tool and tier (fields stored under
    an older name counted under today's: :data:`LEGACY_FIELDS`)."""
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for (tool, tier, stored), value in raw.items():
        name = str(LEGACY_FIELDS.get(stored, stored))
        rows.setdefault((tool, tier), {})[name] = rows.get((tool, tier), {}).get(name, 0.0) + value
    return [TallyRow(tool, tier, counts) for (tool, tier), counts in sorted(rows.items())]
