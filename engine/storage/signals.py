"""In-process change signals: an :class:`asyncio.Event` per approval someone waits on, set when it changes."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable

from hitl.engine.domain.models import Approval

__all__ = ["ChangeSignals", "wait_for_version"]


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


async def wait_for_version(
    approval_id: str,
    *,
    signal: Callable[[str], asyncio.Event],
    read: Callable[[str], Awaitable[Approval]],
    after_version: int,
    timeout: float,
    recheck: float = math.inf,
) -> Approval:
    """``ApprovalStore.wait_changed`` for a store whose changes set ``signal(approval_id)``: the approval once its
    version passes ``after_version``, or as it is when ``timeout`` seconds have passed. The signal is taken before
    each read, so a change committed between the read and the wait still wakes it; ``recheck`` seconds bound each
    wait, for a store whose signals can be lost."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        event = signal(approval_id)
        current = await read(approval_id)
        left = deadline - loop.time()
        if current.version > after_version or left <= 0:
            return current
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(min(left, recheck)):
                await event.wait()
