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
    lost. Renewing at a third of the lease means a live but slow worker is never taken over, a dead one soon is.

    Most blocks end long before the first renewal is due (an effect, a step): for them this is one timer handle,
    set and cancelled. The heartbeat task exists only once a block outlives ``every``."""
    loop = asyncio.get_running_loop()
    beating: list[asyncio.Task[None]] = []

    async def beat() -> None:
        while True:
            if not await renew():
                log.warning("lost %s; another worker took it over", what)
                return
            await asyncio.sleep(every)

    timer = loop.call_later(every, lambda: beating.append(loop.create_task(beat(), name=f"hitl-lease:{what}")))
    try:
        yield
    finally:
        timer.cancel()
        for task in beating:
            task.cancel()
        await asyncio.gather(*beating, return_exceptions=True)
