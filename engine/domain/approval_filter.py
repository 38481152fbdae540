"""Which approvals a filtered listing keeps (:meth:`~hitl.engine.ports.ApprovalStore.list_matching`): by tool, tier,
requester, a reviewer who recorded a decision or vote on it, status (or every decided one) and creation time.

Stores answer it from stored indexes (each SQL store in the query; Redis from the most selective index, checking the
rest as it reads, at most :data:`MOST_EXAMINED` approvals a call); :meth:`ApprovalFilter.keeps` is the one meaning
all of them follow, and what a store checks in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hitl.engine.domain.models import Approval, Status, Tier

__all__ = ["MOST_EXAMINED", "ApprovalFilter"]

MOST_EXAMINED = 2000
"""The most approvals a store that checks some filters in memory reads in one call before it returns the page it
has (possibly short, even empty) with a cursor to continue: a page's cost stays bounded however few rows match."""


@dataclass(frozen=True)
class ApprovalFilter:
    """Filters of a listing, each None for "any"; an approval is kept when it passes all of them."""

    tool: str | None = None
    tier: Tier | None = None
    requester: str | None = None
    reviewer: str | None = None
    """Approvals this reviewer recorded a decision or vote on (the vote's own reviewer, not one it acted for)."""
    status: Status | Literal["decided"] | None = None
    """One status, or ``decided``: every approval no longer pending."""
    created_from: float | None = None
    """Created at this time (epoch seconds) or later."""
    created_before: float | None = None
    """Created before this time (epoch seconds)."""

    def keeps(self, a: Approval) -> bool:
        """Whether ``a`` passes every filter."""
        if self.status == "decided":
            status_ok = a.status is not Status.PENDING
        else:
            status_ok = self.status is None or a.status is self.status
        return (
            status_ok
            and (self.tool is None or a.tool == self.tool)
            and (self.tier is None or a.tier is self.tier)
            and (self.requester is None or a.requester == self.requester)
            and (self.reviewer is None or any(d.reviewer == self.reviewer for d in a.decisions))
            and (self.created_from is None or a.created_at >= self.created_from)
            and (self.created_before is None or a.created_at < self.created_before)
        )
