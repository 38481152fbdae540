"""Walking every pending approval, page by page, for the few callers that must see them all (an admin's listing of
practice approvals, cards brought up to date when a halt changes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from hitl.engine.domain.models import Approval
from hitl.engine.ports import ApprovalStore

__all__ = ["every_pending"]


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
