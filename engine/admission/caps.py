"""Counting each new approval against ``policy.caps`` (:mod:`hitl.engine.domain.caps`) before it is created.

Each cap is one rolling window in the store; adding the approval to it and reading what was there before is one
atomic step, so of two proposals racing for the last place one gets it and the other is refused. A refused proposal
creates nothing: its place in every window it was added to (the caps', the velocity and rolling-sum rules') is given
back, the refusal is audited and counted (the ``flooded`` alert figure), and the caller gets ``approval_flood``
with the seconds to wait. The same action asked for again re-attaches to its approval and never counts twice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hitl.engine.domain.caps import CapsSpec, cap_keys
from hitl.engine.domain.durations import format_duration
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.tally import Outcome, counts_for
from hitl.engine.errors import ErrorCode, Flooded, NotFound
from hitl.engine.ports import Store
from hitl.engine.subscribers.windows import forget_windows

__all__ = ["within_caps"]


async def within_caps(
    store: Store, caps: CapsSpec, approval: Approval, *, counted: Sequence[Sequence[str]], now: float
) -> None:
    """Count ``approval`` against every cap that applies, or raise :class:`Flooded` having counted nothing."""
    keys = cap_keys(caps, requester=approval.requester, session_id=approval.session_id, tool=approval.tool)
    added: list[list[str]] = []
    for what, key, cap in keys:
        prior = await store.windows.add(key, amount=1.0, now=now, window=cap.per, event_id=approval.id)
        added.append([key, approval.id])
        if prior.count < cap.max:
            continue
        try:
            await store.approvals.get(approval.id)
            return  # asked for again: it is there already, and was counted when it was created
        except NotFound:
            pass
        await forget_windows(store, [*added, *counted])
        wait = math.ceil(cap.per)
        who = {"requester": approval.requester, "session": approval.session_id, "tool": approval.tool}[what]
        message = (
            f"{what} {who!r} already has {cap.max} approvals from the last {format_duration(cap.per)} "
            f"(policy.caps.{what}); nothing was created. Retry after {wait} s, or raise the cap in hitl.yaml"
        )
        await store.audit.append(
            AuditEntry(
                at=now,
                actor=approval.requester,
                event="refused",
                outcome=str(ErrorCode.APPROVAL_FLOOD),
                detail=f"{approval.session_id}: {approval.tool}: {message}"[:500],
            )
        )
        tier = str(approval.metadata.get("tier") or approval.tier)
        await store.tallies.add(counts_for(approval.tool, tier, Outcome.FLOODED, now=now), now=now)
        raise Flooded(message, retry_after=wait, cap=what, tool=approval.tool)
