"""The order a reviewer meets pending approvals in: the most important first.

An approval ranks by its tier band (escalate before approve), then by how far over its threshold the fired rule found
it (:attr:`~hitl.engine.domain.models.Approval.ratio`: a payment ten times its rule's limit before one just over it),
then by time left (the soonest deadline first). All three are fixed when the approval is created, so the rank is one
integer the stores keep beside it and index (:func:`rank_key`): a page of the queue costs the same however long it
is, on every store. Time left orders as the deadline does, at any moment, so it needs no update as time passes.

One thing the stored key cannot know is the moment: an approval about to expire must not wait under hours-long
escalations. :func:`queue_order` puts each approval :func:`due_soon` (under ``max(10 min, 10% of its timeout)``
left) above the rest of a page as it is shown, whatever its tier, and :func:`why_ranked` says so. The instant an
approval becomes due soon (:func:`due_soon_at`) is fixed at creation too, so the stores index it and find every
approval due soon at a cost bounded by how many are asked for, wherever the rank puts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from hitl.engine.domain.models import Approval, Tier

__all__ = [
    "DUE_SOON_FLOOR",
    "RANK_BANDS",
    "RATIO_CAP",
    "TIER_WORDS",
    "PendingOrder",
    "band_of",
    "due_soon",
    "due_soon_at",
    "queue_order",
    "rank_key",
    "time_left",
    "waiting_text",
    "why_ranked",
]

PendingOrder = Literal["rank", "age"]
"""The order of a list of pending approvals: ``rank`` (most important first) or ``age`` (oldest first)."""

RATIO_CAP = 1310.71
"""The largest ratio the key tells apart (hundredths, in 17 bits); one further over the threshold ranks as this."""

_RATIO_STEPS = 131071  # 2**17 - 1: hundredths of a ratio up to RATIO_CAP
_DEADLINE_MAX = 2**32 - 1  # whole seconds since 1970, up to the year 2106

DUE_SOON_FLOOR = 600.0
"""Seconds: an approval with less than this left (or 10% of its timeout, if more) is due soon."""
TIER_WORDS = {
    Tier.ESCALATE: "escalated",
    Tier.APPROVE: "approve",
    Tier.SELF: "self",
    Tier.NOTIFY: "notify",
    Tier.AUTO: "auto",
}
"""Each tier as a queue's line names it: a word per tier, so no two tiers look alike in a list."""

_A = TypeVar("_A", bound=Approval)

RANK_BANDS = ("escalate", "approve", "other")
"""The bands the queue and the metrics name, most important first."""


# Fixed numbers, not the tiers' ranks: the stores index this key (PostgreSQL's schema computes it for older rows),
# and a `self` approval waits on one person only, so it shares the lowest band a person is asked in.
_BANDS = {Tier.ESCALATE: 0, Tier.APPROVE: 1, Tier.SELF: 2, Tier.NOTIFY: 2, Tier.AUTO: 3}


def rank_key(a: Approval) -> int:
    """The approval's place in the queue: smaller comes first; ties are broken by id.

    ``band`` (2 bits), ``RATIO_CAP - ratio`` in hundredths (17 bits), the deadline in whole seconds (32 bits): below
    2**51, so every store keeps it exactly (a Redis score is a double)."""
    band = _BANDS[a.tier]
    ratio = min(max(round((a.ratio or 0.0) * 100), 0), _RATIO_STEPS)
    deadline = min(max(int(a.expires_at), 0), _DEADLINE_MAX)
    return (band << 49) | ((_RATIO_STEPS - ratio) << 32) | deadline


def band_of(a: Approval) -> str:
    """The approval's rank band, as the metrics label it: ``escalate``, ``approve`` or ``other``."""
    if a.tier is Tier.ESCALATE:
        return "escalate"
    return "approve" if a.tier is Tier.APPROVE else "other"


def due_soon_at(a: Approval) -> float:
    """The instant ``a`` becomes :func:`due_soon`: ``max(10 min, 10% of its timeout)`` before its deadline. The
    stores compute the same expression (SQL, Redis score) to index it, so keep the arithmetic as it is."""
    return a.expires_at - max(DUE_SOON_FLOOR, max(a.expires_at - a.created_at, 0.0) / 10)


def due_soon(a: Approval, *, now: float) -> bool:
    """Whether ``a`` has under ``max(10 min, 10% of its timeout)`` left (or is past its deadline): it then ranks
    above every approval that is not, whatever its tier (:func:`queue_order`)."""
    return now > due_soon_at(a)


def queue_order(items: Sequence[_A], *, now: float) -> list[_A]:
    """``items`` (in rank order, as a store lists them) as a person meets them at ``now``: those :func:`due_soon`
    first, each part keeping its rank order."""
    return sorted(items, key=lambda a: not due_soon(a, now=now))


def why_ranked(a: Approval, *, now: float) -> str:
    """In a few words why ``a`` ranks where it does, time left said once: "escalated · 10× its rule's limit · 12
    min left"; one due soon says that first: "due soon, so first: 1 min left · approve"."""
    parts = [TIER_WORDS[a.tier]]
    if a.ratio is not None and a.ratio >= 1000:
        parts.append("over 1,000× its rule's limit")
    elif a.ratio is not None and a.ratio > 0:
        parts.append(f"{a.ratio:,.1f}× its rule's limit".replace(".0×", "×"))
    left = time_left(a.expires_at - now)
    if due_soon(a, now=now):
        return " · ".join([f"due soon, so first: {left}", *parts])
    return " · ".join([*parts, left])


def waiting_text(count: int, *, cap: int = 1000) -> str:
    """How much waits on a reviewer, as every surface says it: "3 approvals wait on you"."""
    if count <= 0:
        return "Nothing waits on you"
    if count >= cap:
        return f"{cap:,}+ approvals wait on you"
    return "1 approval waits on you" if count == 1 else f"{count:,} approvals wait on you"


def time_left(seconds: float) -> str:
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
