"""The queue as a person meets it: every approval due soon first, wherever the store's rank puts it, then the rest
in rank order, each once, on every surface that lists what waits (the Home tab, ``/hitl pending``, ``hitl
pending``, the HTTP API's default order).

The store's rank is fixed when an approval is created, so an approval about to expire may sit on a later page
under hours-long escalations; :meth:`~hitl.engine.ports.ApprovalStore.list_due_soon` finds those from their own
index, and the first page shows them above the store's. A later page leaves out those the first showed.
"""

from __future__ import annotations

from collections.abc import Collection

from hitl.engine.domain.models import Approval
from hitl.engine.domain.ranking import queue_order, rank_key
from hitl.engine.domain.records import Page
from hitl.engine.ports import ApprovalStore
from hitl.engine.storage.codec import encode_rank_cursor

__all__ = ["REST", "queue_page"]

REST = "rest"
"""The cursor of the page after a first page the approvals due soon filled: the store's ranked pages from the start
(less those shown as due soon). No store's cursor reads like it."""


async def queue_page(
    approvals: ApprovalStore,
    *,
    now: float,
    roles: Collection[str] | None = None,
    exclude_requester: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> Page:
    """One page of the pending queue at ``now``, at most ``limit`` long: on the first (``cursor`` None), those due
    soon (:func:`~hitl.engine.domain.ranking.due_soon`) first, then the store's ranked page; on a later one, the
    store's page without those. Filters as :meth:`~hitl.engine.ports.ApprovalStore.list_pending`; the cursor
    continues this order only (:data:`REST` or the store's)."""
    due = await approvals.list_due_soon(now=now, roles=roles, exclude_requester=exclude_requester, limit=limit)
    page = await approvals.list_pending(
        roles=roles,
        exclude_requester=exclude_requester,
        limit=limit,
        cursor=None if cursor == REST else cursor,
        order="rank",
        now=now,
    )
    shown = {a.id for a in due}
    rest = [a for a in page.items if a.id not in shown]
    if cursor is not None:
        # queue_order: one due soon that the bounded read left out still leads the page the store put it on.
        return Page(items=queue_order(rest, now=now), cursor=page.cursor)
    room = limit - len(due)
    if len(rest) <= room:
        return Page(items=queue_order([*_ranked(due), *rest], now=now), cursor=page.cursor)
    # The store's page does not fit beside those due soon: the next page continues after the last one shown.
    taken = rest[:room]
    after = encode_rank_cursor(rank_key(taken[-1]), taken[-1].id) if taken else REST
    return Page(items=queue_order([*_ranked(due), *taken], now=now), cursor=after)


def _ranked(items: list[Approval]) -> list[Approval]:
    """``items`` in the store's rank order: those due soon keep the order the rest of the queue reads in."""
    return sorted(items, key=lambda a: (rank_key(a), a.id))
