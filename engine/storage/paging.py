"""Walking every pending approval, page by page, for the few callers that must see them all (an admin's listing of
practice approvals, cards brought up to date when a halt changes), and the newest approvals back to a time (the
figures per reviewer)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from hitl.engine.domain.models import Approval
from hitl.engine.ports import ApprovalStore

__all__ = ["every_pending", "recent_since"]


async def every_pending(approvals: ApprovalStore, *, page: int = 200) -> AsyncIterator[Approval]:
    """Each pending approval, oldest first, following the store's cursor to the end."""
    cursor: str | None = None
    while True:
        found = await approvals.list_pending(limit=page, cursor=cursor)
        for a in found.items:
            yield a
        cursor = found.cursor
        if cursor is None:
            return


async def recent_since(approvals: ApprovalStore, since: float, *, page: int = 200, pages: int = 50) -> list[Approval]:
    """The newest approvals, newest first, until one made before ``since`` (at most ``pages`` pages)."""
    seen: list[Approval] = []
    cursor: str | None = None
    for _ in range(pages):
        found = await approvals.list_recent(limit=page, cursor=cursor)
        seen += found.items
        cursor = found.cursor
        if cursor is None or (found.items and found.items[-1].created_at < since):
            break
    return seen
