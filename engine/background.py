"""The background loop of a long-running process: the run lifecycle's work plus any other sweeps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from engine.lifecycle import RunLifecycle

__all__ = ["Background", "Sweeper"]

log = logging.getLogger(__name__)


class Sweeper(Protocol):
    """Periodic work besides the lifecycle's (the Slack notifier posts missing cards and reminders)."""

    async def sweep(self) -> None: ...


class Background:
    """Runs :meth:`tick` every ``interval`` seconds, and at once when the lifecycle queued a resume.

    Args:
        lifecycle: expiry, recovery and resume jobs.
        interval: seconds between rounds.
        sweepers: more work for each round.
    """

    def __init__(self, lifecycle: RunLifecycle, *, interval: float = 5.0, sweepers: Sequence[Sweeper] = ()) -> None:
        self.lifecycle = lifecycle
        self.interval = interval
        self.sweepers = list(sweepers)
        self._task: asyncio.Task[None] | None = None

    async def tick(self) -> None:
        await self.lifecycle.tick()
        for sweeper in self.sweepers:
            await sweeper.sweep()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="hitl-background")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            self.lifecycle.work.clear()
            try:
                await self.tick()
            except Exception:  # a failing round (the store is down) must not end the loop
                log.exception("background round failed; trying again in %.0f s", self.interval)
            try:
                await asyncio.wait_for(self.lifecycle.work.wait(), self.interval)
            except TimeoutError:
                pass
