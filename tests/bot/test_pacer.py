"""The pacer on its own (no network): urgent calls go first, a 429 holds a lane for every task and, through the
store, for another process's pacer, and one channel is one limit under its name and its id."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl.bot.outbound.pacer import POST, Pacer, urgent
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.waiting import eventually


async def tick(pacer: Pacer, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    pacer.clock_moved()
    await asyncio.sleep(0.02)


async def test_an_urgent_call_goes_before_every_waiting_routine_one() -> None:
    clock = FakeClock()
    pacer = Pacer(clock, burst=1)
    await pacer.admit(POST, "C1")  # the burst
    order: list[str] = []

    async def call(name: str, *, first: bool = False) -> None:
        if first:
            with urgent():
                await pacer.admit(POST, "C1")
        else:
            await pacer.admit(POST, "C1")
        order.append(name)

    tasks = [asyncio.create_task(call(f"card{i}")) for i in range(3)]
    await eventually(lambda: pacer.waiting == 3, what="three cards waiting")
    tasks.append(asyncio.create_task(call("alert", first=True)))
    await eventually(lambda: pacer.waiting == 4, what="the alert waiting too")
    for _ in range(4):
        await tick(pacer, clock, 1.0)
    await asyncio.gather(*tasks)
    assert order == ["alert", "card0", "card1", "card2"]  # one a second, the alert first


async def test_a_429_holds_the_lane_here_and_in_another_process_on_the_store(tmp_path: Path) -> None:
    clock = FakeClock()
    one_store, two_store = SqliteStore(tmp_path / "h.db"), SqliteStore(tmp_path / "h.db")
    one, two = Pacer(clock, one_store.holds, refresh=0.0), Pacer(clock, two_store.holds, refresh=0.0)
    try:
        await one.limited_by_slack(POST, "C1", 20)
        assert one.episodes == 1
        await one.limited_by_slack(POST, "C1", 20)  # a second 429 in the same hold: the same episode
        assert one.episodes == 1 and one.limited == 2
        held = [asyncio.create_task(p.admit(POST, "C1")) for p in (one, two)]
        other = asyncio.create_task(two.admit(POST, "C2"))  # another channel is not held
        await asyncio.wait_for(other, 2)
        for _ in range(19):
            await tick(one, clock, 1.0)
            two.clock_moved()
        assert not any(t.done() for t in held)
        for _ in range(2):
            await tick(one, clock, 1.0)
            two.clock_moved()
        await asyncio.wait_for(asyncio.gather(*held), 2)
    finally:
        await one_store.close()
        await two_store.close()


async def test_a_channel_is_one_limit_by_name_and_by_id() -> None:
    clock = FakeClock()
    pacer = Pacer(clock, burst=1)
    assert pacer.channel_of("#refunds") == "#refunds"
    pacer.learned("#refunds", "C0REFUNDS")
    assert pacer.channel_of("#refunds") == "C0REFUNDS" and pacer.channel_of("C0REFUNDS") == "C0REFUNDS"
    await pacer.admit(POST, pacer.channel_of("#refunds"))
    waiting = asyncio.create_task(pacer.admit(POST, pacer.channel_of("C0REFUNDS")))  # a thread reply, by id
    await asyncio.sleep(0.05)
    assert not waiting.done()  # the same channel's limit
    await tick(pacer, clock, 1.0)
    await asyncio.wait_for(waiting, 2)
