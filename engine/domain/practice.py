"""Practice approvals: now and then a copy of a real approval with one planted defect is put to the
same reviewers, looking like any other, to measure whether reviews catch what they should (automation bias,
rubber-stamping). Pure: no I/O.

A practice approval belongs to no run and nothing ever executes it (every execution path refuses it); once decided,
the reviewer is told privately that it was practice and whether the defect was caught (Reject or an edit catches
it; Approve and Trust miss it). It never counts in the other measures: only in the practice figures.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from hitl.engine.domain.durations import parse_duration
from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Status
from hitl.engine.domain.sampling import draw, rate_for, sampled

__all__ = [
    "PRACTICE",
    "Defect",
    "PracticeSpec",
    "caught",
    "defect_for",
    "is_practice",
    "planted",
    "post_after",
    "practice_note",
    "picked_for_practice",
]

PRACTICE = ApprovalKind.PRACTICE
"""A practice approval's kind (never shown on a card)."""


class Defect(BaseModel):
    """A defect to plant in a tool's arguments: ``set`` is merged onto them; ``says`` is what it is, told after."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=60)
    set: dict[str, Any] = Field(min_length=1)
    says: str = Field(min_length=1, max_length=300)


def _delay(value: object) -> float:
    """A duration, or 0 (post at once)."""
    return 0.0 if value in (0, 0.0, "0", "0s") else parse_duration(value)


class PracticeSpec(BaseModel):
    """``oversight.practice``: how often a real approval of a tool gets a practice twin (by tool, else by tier, else
    ``rate``), the defects declared per tool (a tool without defects never gets a twin), and how long a twin may wait
    before it is created and posted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    delay: Annotated[float, BeforeValidator(_delay)] = 300.0
    """The longest a twin waits before it is created and its card posted (a random share of it, each time), so it
    never arrives right beside its real approval's card; 0 creates it at once."""
    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    tools: dict[str, float] = Field(default_factory=dict)
    tiers: dict[str, float] = Field(default_factory=dict)
    defects: dict[str, list[Defect]] = Field(default_factory=dict)

    def rate_for(self, tool: str, tier: str) -> float:
        """The practice rate of ``tool`` at ``tier`` (0 when it has no defects to plant)."""
        if not self.defects.get(tool):
            return 0.0
        return rate_for(tool, tier, tools=self.tools, tiers=self.tiers, rate=self.rate)


def picked_for_practice(approval_id: str, rate: float) -> bool:
    """Whether the real approval ``approval_id`` gets a practice twin (a stable draw)."""
    return sampled(f"seed:{approval_id}", rate)


def defect_for(spec: PracticeSpec, tool: str, approval_id: str) -> Defect:
    """Which of the tool's defects is planted in the twin of ``approval_id`` (a stable choice)."""
    choices = spec.defects[tool]
    return choices[int(draw(f"defect:{approval_id}") * len(choices)) % len(choices)]


def post_after(spec: PracticeSpec, now: float) -> float:
    """When a twin drawn at ``now`` is created and posted: a random instant within ``spec.delay`` (not derived from
    anything a caller knows, so the gap between a real card and its twin's tells nothing)."""
    return now + secrets.SystemRandom().uniform(0.0, spec.delay) if spec.delay > 0 else now


def planted(twin: Approval, now: float) -> Approval:
    """``twin`` as created at ``now``: every time it carries moved by the same amount, so it tells the story a
    real approval created then would (created now, expiring and handed on after its real one's timeouts).
    Its card, its ``approval.created`` event and every view then agree with one another."""
    shift = now - twin.created_at
    moved: dict[str, float] = {"created_at": now, "expires_at": twin.expires_at + shift}
    if twin.hand_on_at is not None:
        moved["hand_on_at"] = twin.hand_on_at + shift
    return twin.model_copy(update=moved)


def is_practice(a: Approval) -> bool:
    """Whether ``a`` is a practice approval."""
    return a.kind is ApprovalKind.PRACTICE


def caught(a: Approval) -> bool | None:
    """Whether the planted defect was caught: rejected (an edit counts as a rejection of what was shown); None
    while it is undecided or when it ended without a decision."""
    if a.status is Status.REJECTED:
        return True
    last = a.decisions[-1] if a.decisions else None
    if a.status in (Status.APPROVED, Status.EXECUTED) and last is not None and last.kind is not DecisionKind.REJECT:
        return False
    return None


def practice_note(a: Approval) -> str | None:
    """What the reviewer who decided a practice approval is told, privately (None while it is undecided)."""
    found = caught(a)
    if found is None:
        return None
    says = str(a.metadata.get("says", "a planted defect"))
    verdict = "You caught it." if found else "It was approved: the defect was missed."
    return f"That was a practice check: hitl planted a defect ({says}). {verdict} Nothing ran."
