"""Periodic background work of a long-running process: one round every interval (or at once when woken), a
failing round retried, never ending the loop. An outage is logged once when it starts (a WARNING, with the real
retry interval) and once when it ends (an INFO), never a traceback per round (:class:`Outages`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from hitl.engine.errors import StoreError

__all__ = ["Outages", "Periodic"]

log = logging.getLogger(__name__)


class Outages:
    """Whether a loop's work is failing, counted for ``/metrics`` and logged only when that changes: a WARNING when
    the first round fails (with a traceback only for a failure that is not the store's), an INFO when a round works
    again. A loop calls :meth:`failed` or :meth:`ok` after each round.

    Args:
        name: what is failing, in the log lines.
        every: seconds between tries, as the log lines say it.
        logger: where the lines go.
    """

    def __init__(self, name: str, *, every: float, logger: logging.Logger = log) -> None:
        self.name = name
        self.every = every
        self.log = logger
        self.started = 0
        """Outages so far (a counter for ``/metrics``)."""
        self.down = False
        self._since = 0.0
        self._rounds = 0

    def failed(self, exc: BaseException) -> None:
        """A round failed: said once per outage."""
        self._rounds += 1
        if self.down:
            return
        self.down, self._since, self.started = True, time.monotonic(), self.started + 1
        what = exc.message if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
        self.log.warning(
            "%s is failing (%s); trying again every %g s, and saying so once it works again",
            self.name,
            what,
            self.every,
            exc_info=not isinstance(exc, StoreError),  # a bug deserves its traceback, once; an outage does not
        )

    def ok(self) -> None:
        """A round worked: an outage, if any, is over."""
        if self.down:
            self.log.info(
                "%s works again after %.1f s (%d failed rounds)",
                self.name,
                time.monotonic() - self._since,
                self._rounds,
            )
        self.down, self._rounds = False, 0


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
        self.outages = Outages(name, every=interval)
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
            except Exception as exc:  # a failing round (the store is down) must not end the loop
                self.outages.failed(exc)
            else:
                self.outages.ok()
            try:
                if self.wake is None:
                    await asyncio.sleep(self.interval)
                else:
                    await asyncio.wait_for(self.wake.wait(), self.interval)
            except TimeoutError:
                pass
