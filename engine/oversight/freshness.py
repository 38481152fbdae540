"""What every process reads from the store again at most every half second, so that a change made in any process
reaches every replica within one second: the stop switch's orders, the delegations in force. One reader per store
in a process (:func:`shared_per_store`), so a change made here holds here at once."""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from hitl.engine.ports import Store

__all__ = ["FRESH_FOR", "FreshRead", "shared_per_store"]

T = TypeVar("T")
R = TypeVar("R")

FRESH_FOR = 0.5
"""Seconds a read is used before it is read again (half the one-second promise)."""


class FreshRead(Generic[T]):
    """The last value ``read`` returned, used for at most ``fresh_for`` seconds of the event loop's time."""

    def __init__(self, read: Callable[[], Awaitable[T]], *, fresh_for: float = FRESH_FOR) -> None:
        self.read = read
        self.fresh_for = fresh_for
        self._value: T | None = None
        self._read_at: float | None = None
        self._changes = 0
        self._reading: asyncio.Task[T] | None = None
        self._waiting: list[asyncio.Future[T]] = []
        """The callers waiting for ``_reading``, each on a future of its own."""

    async def get(self) -> T:
        """The value as read at most :attr:`fresh_for` seconds ago (read again now when older). Callers that
        find it old while a read is on its way share that read: the many tool calls an agent runs at once would
        otherwise each send the store the same read whenever the value ages out."""
        held = self.held()
        if held is not None:
            return held
        loop = asyncio.get_running_loop()
        reading = self._reading
        if reading is None or reading.get_loop() is not loop:
            waiting: list[asyncio.Future[T]] = []
            reading = self._reading = loop.create_task(self._read_now(self._changes))
            reading.add_done_callback(functools.partial(_settle, waiting))
            self._waiting = waiting
        # Each caller waits on a future of its own, so a caller cancelled while it waits cancels only that one, not
        # the read the others wait for; all of them are settled in one callback when the read ends (a shield per
        # caller, as before, cost each of a turn's calls two more event-loop callbacks: ~5 µs of CPU per call).
        waiter: asyncio.Future[T] = loop.create_future()
        self._waiting.append(waiter)
        return await waiter

    async def _read_now(self, changes: int) -> T:
        try:
            value = await self.read()
        finally:
            if self._reading is asyncio.current_task():
                self._reading = None
        if changes == self._changes:  # a read begun before a change made here would hide it: not kept
            self._value, self._read_at = value, asyncio.get_running_loop().time()
        return value

    def held(self) -> T | None:
        """The value read less than :attr:`fresh_for` seconds ago, or None when it must be read again."""
        if self._read_at is None or asyncio.get_running_loop().time() - self._read_at >= self.fresh_for:
            return None
        return self._value

    def forget(self) -> None:
        """A change was made here: the next :meth:`get` reads again (it does not share a read begun before)."""
        self._read_at, self._changes, self._reading = None, self._changes + 1, None


def _settle(waiting: list[asyncio.Future[T]], read: asyncio.Task[T]) -> None:
    """Hand a shared read's outcome (its value, its failure, or its cancellation) to every caller still waiting
    for it. The failure is taken here even when every caller was cancelled first, so asyncio does not log it as
    never retrieved."""
    failure = None if read.cancelled() else read.exception()
    for waiter in waiting:
        if waiter.done():  # its caller was cancelled
            continue
        if read.cancelled():
            waiter.cancel()
        elif failure is not None:
            waiter.set_exception(failure)
        else:
            waiter.set_result(read.result())


def shared_per_store(registry: weakref.WeakKeyDictionary[Store, R], store: Store, make: Callable[[], R]) -> R:
    """The process's one ``R`` for ``store`` in ``registry`` (made by ``make`` the first time); a store of your own
    that cannot be a weak key gets one of its own each time (its reads then 0.5 s apart)."""
    try:
        found = registry.get(store)
        if found is None:
            found = registry[store] = make()
    except TypeError:
        return make()
    return found
