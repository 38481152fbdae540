"""Metric counts held for a few seconds and written together: an allowed call's fast path pays no round trip for
them. Every store uses it in front of its own write."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Generic, TypeVar

from hitl.engine.domain.tally import TallyKey

__all__ = ["BufferedTallies", "TallyBuffer", "flush_at_close"]

D = TypeVar("D")


class TallyBuffer:
    """Sums counts and hands them to ``write`` once ``every`` seconds passed since the first one held, once
    ``most`` keys are held, or on :meth:`flush` (a store's ``close``). A process killed outright loses at most
    those seconds of counts; a failed write keeps them for the next one."""

    def __init__(
        self, write: Callable[[dict[TallyKey, float]], Awaitable[None]], *, every: float = 5.0, most: int = 500
    ) -> None:
        self._write = write
        self.every = every
        self.most = most
        self._held: dict[TallyKey, float] = {}
        self._since: float | None = None
        self._lock = asyncio.Lock()

    async def add(self, counts: Mapping[TallyKey, float], *, now: float) -> None:
        for key, value in counts.items():
            self._held[key] = self._held.get(key, 0.0) + value
        if self._since is None:
            self._since = now
        if len(self._held) >= self.most or now - self._since >= self.every:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            if not self._held:
                return
            held, self._held, self._since = self._held, {}, None
            try:
                await self._write(held)
            except BaseException:
                for key, value in held.items():  # kept for the next write
                    self._held[key] = self._held.get(key, 0.0) + value
                raise


class BufferedTallies(ABC, Generic[D]):
    """The :class:`hitl.engine.ports.Tallies` side a SQL store's tallies share: counts added are held in a
    :class:`TallyBuffer` and written together by the store's own :meth:`_write` to ``db``, its connection."""

    def __init__(self, db: D) -> None:
        self.db = db
        self.buffer = TallyBuffer(self._write)

    def add(self, counts: Mapping[TallyKey, float], *, now: float) -> Coroutine[Any, Any, None]:
        """Hold ``counts`` (written with the next batch)."""
        return self.buffer.add(counts, now=now)  # the buffer's own coroutine: every allowed call passes here

    async def flush(self) -> None:
        """Write the counts held now."""
        await self.buffer.flush()

    @abstractmethod
    async def _write(self, counts: dict[TallyKey, float]) -> None:
        """Add ``counts`` to the store's tallies in one transaction."""


async def flush_at_close(flush: Callable[[], Awaitable[None]], log: logging.Logger) -> None:
    """Write the metric counts a closing store still holds (``flush``); a failure is logged on the store's ``log``
    and the store closes anyway: a metric is not worth failing a shutdown over."""
    try:
        await flush()
    except Exception:
        log.warning("could not write the last metric counts; they are lost")
