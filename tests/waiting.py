"""The one way a test waits for something another process or task does: poll a condition until it holds.

A test never sleeps a fixed time hoping the work is done, and never sleeps to wait for an expiry (it moves a
``FakeClock``). It waits for what it can observe, up to a generous deadline, and fails saying what it waited for
and what it saw last. A process the test started gets one budget to be ready (:func:`started`), wherever it is
waited for.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

__all__ = ["STARTING", "accepts", "eventually", "eventually_sync", "started", "started_sync"]

T = TypeVar("T")

STARTING = 90.0
"""Seconds a process a test started gets to be ready (to answer its health check, listen, print its address). Its
imports alone take a few seconds of CPU; beside other processes on two busy cores (load 6-10) a `hitl serve` took
more than 20. The waits after it is ready keep :func:`eventually`'s own."""


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]], *, what: str, timeout: float = ..., interval: float = ...
) -> T: ...


@overload
async def eventually(check: Callable[[], T | None], *, what: str, timeout: float = ..., interval: float = ...) -> T: ...


async def eventually(check: Callable[[], Any], *, what: str, timeout: float = 20.0, interval: float = 0.05) -> Any:
    """Call ``check`` (sync or async) until it returns a truthy value, and return that value.

    Raises:
        AssertionError: ``timeout`` seconds passed; the message names ``what`` and the last value seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        value = await got if inspect.isawaitable(got) else got
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last saw {value!r}")
        await asyncio.sleep(interval)


def eventually_sync(check: Callable[[], T | None], *, what: str, timeout: float = 20.0, interval: float = 0.05) -> T:
    """:func:`eventually` for a test that is not a coroutine (a subprocess, a file, a socket)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}; last saw {value!r}")
        time.sleep(interval)


@overload
async def started(check: Callable[[], Awaitable[T | None]], *, what: str, interval: float = ...) -> T: ...


@overload
async def started(check: Callable[[], T | None], *, what: str, interval: float = ...) -> T: ...


async def started(check: Callable[[], Any], *, what: str, interval: float = 0.05) -> Any:
    """:func:`eventually` for a process the test started to be ready, within :data:`STARTING`."""
    return await eventually(check, what=what, timeout=STARTING, interval=interval)


def started_sync(check: Callable[[], T | None], *, what: str, interval: float = 0.05) -> T:
    """:func:`started` for a test or fixture that is not a coroutine."""
    return eventually_sync(check, what=what, timeout=STARTING, interval=interval)


def accepts(port: int) -> bool:
    """Whether something listens on ``port`` of 127.0.0.1 (a condition for :func:`eventually`)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
