"""The order a reviewer meets pending approvals in: the most important first.

An approval ranks by its tier band (escalate before approve), then by how far over its threshold the fired rule found
it (:attr:`~hitl.engine.domain.models.Approval.ratio`: a payment ten times its rule's limit before one just over it),
then by time left (the soonest deadline first). All three are fixed when the approval is created, so the rank is one
integer the stores keep beside it and index (:func:`rank_key`): a page of the queue costs the same however long it
is, on every store. Time left orders as the deadline does, at any moment, so it needs no update as time passes.
"""

from __future__ import annotations

from typing import Literal

from hitl.engine.domain.models import Approval, Tier

__all__ = ["RANK_BANDS", "RATIO_CAP", "PendingOrder", "band_of", "rank_key", "waiting_text", "why_ranked"]

PendingOrder = Literal["rank", "age"]
"""The order of a list of pending approvals: ``rank`` (most important first) or ``age`` (oldest first)."""

RATIO_CAP = 1310.71
"""The largest ratio the key tells apart (hundredths, in 17 bits); one further over the threshold ranks as this."""

_RATIO_STEPS = 131071  # 2**17 - 1: hundredths of a ratio up to RATIO_CAP
_DEADLINE_MAX = 2**32 - 1  # whole seconds since 1970, up to the year 2106

RANK_BANDS = ("escalate", "approve", "other")
"""The bands the queue and the metrics name, most important first."""


def rank_key(a: Approval) -> int:
    """The approval's place in the queue: smaller comes first; ties are broken by id.

    ``band`` (2 bits), ``RATIO_CAP - ratio`` in hundredths (17 bits), the deadline in whole seconds (32 bits): below
    2**51, so every store keeps it exactly (a Redis score is a double)."""
    band = 3 - a.tier.rank
    ratio = min(max(round((a.ratio or 0.0) * 100), 0), _RATIO_STEPS)
    deadline = min(max(int(a.expires_at), 0), _DEADLINE_MAX)
    return (band << 49) | ((_RATIO_STEPS - ratio) << 32) | deadline


def band_of(a: Approval) -> str:
    """The approval's rank band, as the metrics label it: ``escalate``, ``approve`` or ``other``."""
    if a.tier is Tier.ESCALATE:
        return "escalate"
    return "approve" if a.tier is Tier.APPROVE else "other"


def why_ranked(a: Approval, *, now: float) -> str:
    """In a few words why ``a`` ranks where it does: "escalated · 10× its rule's limit · 12 min left"."""
    parts = ["escalated" if a.tier is Tier.ESCALATE else str(a.tier)]
    if a.ratio is not None and a.ratio >= 1000:
        parts.append("over 1,000× its rule's limit")
    elif a.ratio is not None and a.ratio > 0:
        parts.append(f"{a.ratio:,.1f}× its rule's limit".replace(".0×", "×"))
    parts.append(_left(a.expires_at - now))
    return " · ".join(parts)


def waiting_text(count: int, *, cap: int = 1000) -> str:
    """How much waits on a reviewer, as every surface says it: "3 approvals wait on you"."""
    if count <= 0:
        return "Nothing waits on you"
    if count >= cap:
        return f"{cap:,}+ approvals wait on you"
    return "1 approval waits on you" if count == 1 else f"{count:,} approvals wait on you"


def _left(seconds: float) -> str:
    """Time left as a person says it: "under a minute left", "12 min left", "3 h left", "2 days left"."""
    if seconds <= 0:
        return "past its deadline"
    minutes = int(seconds // 60)
    if minutes < 1:
        return "under a minute left"
    if minutes < 60:
        return f"{minutes} min left"
    if minutes < 48 * 60:
        return f"{minutes // 60} h left"
    return f"{minutes // (24 * 60)} days left"
