"""In-process change signals: an :class:`asyncio.Event` per approval someone waits on, set when it changes."""

from __future__ import annotations

import asyncio

__all__ = ["ChangeSignals"]


class ChangeSignals:
    """The waiters of one process, by approval (the SQLite and PostgreSQL stores each hold one; what sets them
    differs: a commit here, a poll of the file, a ``NOTIFY``)."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Event] = {}

    def changed(self, *approval_ids: str) -> None:
        """Approvals changed (committed): wake their waiters."""
        for approval_id in approval_ids:
            event = self.waiting.pop(approval_id, None)
            if event is not None:
                event.set()

    def signal(self, approval_id: str) -> asyncio.Event:
        """An event set the next time ``approval_id`` changes (one per approval, shared by its waiters)."""
        event = self.waiting.get(approval_id)
        if event is None:
            event = self.waiting[approval_id] = asyncio.Event()
        return event
