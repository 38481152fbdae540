"""Keeping a lease alive while work runs: the one heartbeat behind run ownership and effect claims."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["kept_alive"]

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def kept_alive(renew: Callable[[], Awaitable[bool]], *, every: float, what: str) -> AsyncIterator[None]:
    """Call ``renew`` every ``every`` seconds while the block runs; stop (and say so) once it reports the lease
    lost. Renewing at a third of the lease means a live but slow worker is never taken over, a dead one soon is."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(every)
            if not await renew():
                log.warning("lost %s; another worker took it over", what)
                return

    task = asyncio.create_task(beat(), name=f"hitl-lease:{what}")
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
