"""How long a store keeps what it no longer needs, and what a purge removed.

Two horizons, counted from when a thing ended:

* **records**: runs that ended, approvals in a final state (with their card's message reference), finished
  execution claims, done jobs, lapsed trust grants. An approval is kept while the run of its session is still
  running or paused, whatever its age: the run may still need it. A claim is kept :data:`CLAIM_GRACE` longer than
  records, so an approval or run that can still be asked about never finds its effect's claim gone (which would
  let the effect run again).
* **audit**: an approval's audit chain, once the approval itself is gone and the chain's last entry is older than
  the horizon; and the oldest entries of the run-level chain (entries that belong to no approval). It must be at
  least the records horizon: the trail outlives what it describes.

Removing audit entries stays tamper-evident. A purge removes whole approval chains (never part of one) and a
prefix of the run-level chain, and first appends a :data:`PURGE_EVENT` entry to the run-level chain, chained like
any other, that names the *anchor*: the link the remaining run-level chain now starts after. ``hitl audit verify``
accepts a run-level chain that starts after the anchor named by its latest purge entry, and nothing else, so a
prefix removed by hand still shows as a break. Metric counts are kept :data:`TALLY_KEEP`, whatever the horizons.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from hitl.engine.domain.durations import parse_duration
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import ErrorCode, InvalidInput

__all__ = [
    "AUDIT_DEFAULT",
    "CLAIM_GRACE",
    "LIVE_RUN_STATUSES",
    "PURGE_EVENT",
    "RECORDS_DEFAULT",
    "TALLY_KEEP",
    "Purged",
    "Retention",
    "anchor_of",
    "purge_entry",
]

DAY = 86400.0
RECORDS_DEFAULT = 30 * DAY
AUDIT_DEFAULT = 400 * DAY
CLAIM_GRACE = DAY
TALLY_KEEP = 400 * DAY
"""Seconds an hour's metric counts are kept (a year of dashboards, and the same hour last year)."""
PURGE_EVENT = "purged"
LIVE_RUN_STATUSES = ("running", "paused")
"""Run statuses that have not ended; a run in any other (known) status has."""
_NEVER = ("never", "forever", "off")


def _horizon(value: str | float | None, name: str) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NEVER):
        return None
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidInput(f"{name}: {exc}, or 'never' to keep everything", code=ErrorCode.INVALID_INPUT) from exc


@dataclass(frozen=True, slots=True)
class Retention:
    """How long ended records and the audit trail are kept, in seconds; ``None`` keeps them for ever."""

    records: float | None = RECORDS_DEFAULT
    audit: float | None = AUDIT_DEFAULT

    def __post_init__(self) -> None:
        for name, value in (("retention", self.records), ("audit retention", self.audit)):
            if value is not None and value <= 0:
                raise InvalidInput(f"{name} must be positive, or 'never'", code=ErrorCode.INVALID_INPUT)
        if self.audit is not None and (self.records is None or self.audit < self.records):
            raise InvalidInput(
                "the audit retention must be at least the records retention (the trail outlives what it "
                "describes); raise audit_retention, or set it to 'never'",
                code=ErrorCode.INVALID_INPUT,
            )

    @classmethod
    def parse(cls, records: str | float | None = None, audit: str | float | None = None) -> Retention:
        """From text such as ``30d`` or ``never``; an omitted one keeps its default."""
        return cls(
            records=RECORDS_DEFAULT if records is None else _horizon(records, "retention"),
            audit=AUDIT_DEFAULT if audit is None else _horizon(audit, "audit retention"),
        )

    def records_before(self, now: float) -> float | None:
        """Records that ended before this time are removed (None: none are)."""
        return None if self.records is None else now - self.records

    def audit_before(self, now: float) -> float | None:
        """Audit chains whose last entry is older than this are removed (None: none are)."""
        return None if self.audit is None else now - self.audit

    def describe(self) -> str:
        def span(v: float | None) -> str:
            if v is None:
                return "never"
            unit, size = next((u, n) for u, n in (("d", DAY), ("h", 3600.0), ("s", 1.0)) if v >= n or u == "s")
            return f"{v / size:g}{unit}"

        return f"records {span(self.records)}, audit {span(self.audit)}"


class Purged(BaseModel):
    """What one purge removed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    runs: int = 0
    approvals: int = 0
    claims: int = 0
    jobs: int = 0
    trust: int = 0
    chains: int = 0
    """Approval audit chains, removed whole."""
    audit_entries: int = 0
    """Audit entries removed: the chains' and the run-level chain's."""

    @property
    def total(self) -> int:
        return sum(self.model_dump().values())

    def __add__(self, other: Purged) -> Purged:
        mine, theirs = self.model_dump(), other.model_dump()
        return Purged(**{k: v + theirs[k] for k, v in mine.items()})

    def with_audit(self, chains: Sequence[tuple[str, int]], events: Sequence[object]) -> Purged:
        """These counts and the audit a purge removes besides: ``chains`` (id, length) whole, and ``events``, the
        run-level chain's oldest entries."""
        removed = sum(n for _, n in chains) + len(events)
        return self.model_copy(update={"chains": len(chains), "audit_entries": removed})


def purge_entry(purged: Purged, *, anchor: str, now: float, actor: str, retention: Retention) -> AuditEntry:
    """The run-level audit entry a purge appends before it removes anything (see the module docstring)."""
    detail: dict[str, Any] = {"anchor": anchor, "retention": retention.describe(), **purged.model_dump()}
    return AuditEntry(at=now, actor=actor, event=PURGE_EVENT, detail=json.dumps(detail, sort_keys=True))


def anchor_of(entry: AuditEntry) -> str | None:
    """The anchor a purge entry names, or None for any other entry."""
    if entry.event != PURGE_EVENT or entry.approval_id is not None:
        return None
    try:
        anchor = json.loads(entry.detail).get("anchor")
    except (ValueError, AttributeError):
        return None
    return anchor if isinstance(anchor, str) else None
