"""What a turn of tool calls pays when the stop switch's orders are old: one read of the store between them, and
each call woken once when it lands, on every store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from hitl.engine.domain.halts import HaltOrder
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Store
from hitl.testing import FakeClock

CALLS = 20


async def test_calls_that_wait_for_one_read_are_each_woken_by_one_callback(
    opener: Callable[[], Store], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent framework runs a turn's calls at once, and every turn after a pause finds the orders old. Each call
    waiting for the shared read is woken by one event-loop callback when it lands (a shield per call cost two more:
    ~5 µs of CPU for every allowed call of such a turn, most of what the adapters added beyond gate.check)."""
    store = opener()
    switch = StopSwitch(store, clock)
    loop = asyncio.get_running_loop()
    scheduled: list[Any] = []
    counting = False
    call_soon = loop.call_soon

    def counted(callback: Any, *args: Any, **kw: Any) -> asyncio.Handle:
        if counting:
            scheduled.append(callback)
        return call_soon(callback, *args, **kw)

    active = store.halts.active

    async def read() -> list[HaltOrder]:
        nonlocal counting
        orders = await active()  # the real read; what follows it is the wake-up of its waiters
        counting = True
        return orders

    monkeypatch.setattr(store.halts, "active", read)
    monkeypatch.setattr(loop, "call_soon", counted)
    calls = [loop.create_task(switch.orders()) for _ in range(CALLS)]
    done, _ = await asyncio.wait(calls)
    counting = False
    assert all(task.result() == [] for task in done)
    # Per call: its wake-up, and asyncio.wait's own note that it finished; then the read's one callback (it hands
    # the orders to every waiter) and this test's own wake-up.
    assert len(scheduled) <= 2 * CALLS + 2, scheduled[:8]
