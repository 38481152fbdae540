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
    """Runs the lifecycle's round every ``interval`` seconds (at once when it queued a resume), and the sweeps
    every ``sweep_interval`` seconds.

    Args:
        lifecycle: expiry, recovery and resume jobs.
        interval: seconds between lifecycle rounds; with the default run lease (6 s) a run whose worker died is
            taken over within about 8 s.
        sweepers: slower periodic work (cards, reminders).
        sweep_interval: seconds between sweeps.
    """

    def __init__(
        self,
        lifecycle: RunLifecycle,
        *,
        interval: float = 2.0,
        sweepers: Sequence[Sweeper] = (),
        sweep_interval: float = 5.0,
    ) -> None:
        self.lifecycle = lifecycle
        self.interval = interval
        self.sweepers = list(sweepers)
        self.sweep_interval = sweep_interval
        self._task: asyncio.Task[None] | None = None
        self._swept_at = -1e18

    async def tick(self, *, sweep: bool = True) -> None:
        """One lifecycle round and, with ``sweep``, one round of every sweeper."""
        await self.lifecycle.tick()
        if sweep:
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
            loop = asyncio.get_running_loop()
            due = loop.time() - self._swept_at >= self.sweep_interval
            try:
                await self.tick(sweep=due)
                if due:
                    self._swept_at = loop.time()
            except Exception:  # a failing round (the store is down) must not end the loop
                log.exception("background round failed; trying again in %.0f s", self.interval)
            try:
                await asyncio.wait_for(self.lifecycle.work.wait(), self.interval)
            except TimeoutError:
                pass
