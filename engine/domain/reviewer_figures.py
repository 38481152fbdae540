"""The oversight figures per reviewer, read from decided approvals (for the admin role: who may be rubber-stamping).
Pure: no I/O.

For each reviewer over a period: their decisions and corrections (modified or rejected), the practice approvals they
decided (each Approve or Trust missed the planted defect, each Reject or edit caught it), and the spot checks they
answered (and flagged).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hitl.engine.domain.models import Approval, DecisionKind, Tier
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.spot_checks import is_spot_check

__all__ = ["ReviewerFigures", "by_reviewer"]

_CORRECTIONS = frozenset({DecisionKind.REJECT, DecisionKind.MODIFY})
_GOES_ON = frozenset({DecisionKind.APPROVE, DecisionKind.TRUST})


@dataclass
class ReviewerFigures:
    """One reviewer's figures over a period."""

    reviewer: str
    decisions: int = 0
    corrections: int = 0
    practice_caught: int = 0
    practice_missed: int = 0
    spot_checks: int = 0
    spot_flags: int = 0

    @property
    def catch_rate(self) -> float | None:
        """Share of their practice decisions that caught the planted defect (None: none)."""
        n = self.practice_caught + self.practice_missed
        return self.practice_caught / n if n else None

    @property
    def audit_yield(self) -> float | None:
        """Share of their spot checks they flagged (None: none)."""
        return self.spot_flags / self.spot_checks if self.spot_checks else None


def by_reviewer(approvals: Iterable[Approval], *, since: float) -> list[ReviewerFigures]:
    """Each reviewer's figures from the decisions made at or after ``since``, by reviewer id."""
    found: dict[str, ReviewerFigures] = {}
    for a in approvals:
        if a.tier is Tier.SELF:  # the requester's own confirmation, not a review: counted apart (``hitl stats``)
            continue
        practice, spot = is_practice(a), is_spot_check(a)
        for d in a.decisions:
            if d.at < since or d.kind is DecisionKind.FEEDBACK:
                continue
            f = found.setdefault(d.reviewer, ReviewerFigures(d.reviewer))
            if practice:
                f.practice_caught += d.kind in _CORRECTIONS
                f.practice_missed += d.kind in _GOES_ON
            elif spot:
                f.spot_checks += 1
                f.spot_flags += d.kind is DecisionKind.REJECT
            else:
                f.decisions += 1
                f.corrections += d.kind in _CORRECTIONS
    return sorted(found.values(), key=lambda f: f.reviewer)
