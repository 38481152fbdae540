"""Periodic background work of a long-running process: one round every interval (or at once when woken), a
failing round logged and retried, never ending the loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

__all__ = ["Periodic"]

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``round()`` every ``interval`` seconds between :meth:`start` and :meth:`stop` (both idempotent).

    Args:
        name: the task's name (in logs and task listings).
        round: one round of work.
        interval: seconds between rounds.
        wake: set to start the next round at once (cleared before each round).
    """

    def __init__(
        self, name: str, round: Callable[[], Awaitable[None]], *, interval: float, wake: asyncio.Event | None = None
    ) -> None:
        self.name = name
        self.round = round
        self.interval = interval
        self.wake = wake
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            if self.wake is not None:
                self.wake.clear()
            try:
                await self.round()
            except Exception:  # a failing round (the store is down) must not end the loop
                log.exception("%s round failed; trying again in %.0f s", self.name, self.interval)
            try:
                if self.wake is None:
                    await asyncio.sleep(self.interval)
                else:
                    await asyncio.wait_for(self.wake.wait(), self.interval)
            except TimeoutError:
                pass
