"""The background loop of a long-running process: the run lifecycle's work plus any other sweeps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from hitl.engine.process.tasks import Outages, Periodic
from hitl.engine.runtime.lifecycle import RunLifecycle

__all__ = ["Background", "Sweeper"]


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
        watchers: long-running work started and stopped with the loop (cards for approvals the store announces).
    """

    def __init__(
        self,
        lifecycle: RunLifecycle,
        *,
        interval: float = 2.0,
        sweepers: Sequence[Sweeper] = (),
        sweep_interval: float = 5.0,
        watchers: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.lifecycle = lifecycle
        self.watchers = list(watchers)
        self._watching: list[asyncio.Task[None]] = []
        self.interval = interval
        self.sweepers = list(sweepers)
        self.sweep_interval = sweep_interval
        self._periodic = Periodic("hitl-background", self._round, interval=interval, wake=lifecycle.work)
        self._swept_at = -1e18

    async def tick(self, *, sweep: bool = True) -> None:
        """One lifecycle round and, with ``sweep``, one round of every sweeper."""
        await self.lifecycle.tick()
        if sweep:
            for sweeper in self.sweepers:
                await sweeper.sweep()

    @property
    def outages(self) -> Outages:
        """The loop's outages (for ``/metrics``)."""
        return self._periodic.outages

    def start(self) -> None:
        self._periodic.start()
        if not self._watching:
            self._watching = [asyncio.create_task(_run(w), name="hitl-watcher") for w in self.watchers]

    async def stop(self) -> None:
        await self._periodic.stop()
        for task in self._watching:
            task.cancel()
        await asyncio.gather(*self._watching, return_exceptions=True)
        self._watching = []

    async def _round(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() - self._swept_at >= self.sweep_interval
        await self.tick(sweep=due)
        if due:
            self._swept_at = loop.time()


async def _run(watcher: Callable[[], Awaitable[None]]) -> None:
    await watcher()
