"""The one way a test waits for something another process or task does: poll a condition until it holds.

A test never sleeps a fixed time hoping the work is done, and never sleeps to wait for an expiry (it moves a
``FakeClock``). It waits for what it can observe, up to a generous deadline, and fails saying what it waited for
and what it saw last.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

__all__ = ["accepts", "eventually", "eventually_sync"]

T = TypeVar("T")


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


def accepts(port: int) -> bool:
    """Whether something listens on ``port`` of 127.0.0.1 (a condition for :func:`eventually`)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
