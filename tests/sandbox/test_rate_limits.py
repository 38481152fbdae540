"""The stand-in limits calls as Slack does: per method and app, posting per channel and per workspace, a 429 with
``Retry-After`` beyond, on the workspace's clock (a fake one here: calls are counted, nothing waits)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from hitl.sandbox.rate_limits import PER_MINUTE, POSTS_PER_WORKSPACE_PER_MINUTE
from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.webapi import SlackState
from hitl.testing import FakeClock


@pytest.fixture(params=[1, 10])  # Slack publishes no burst size: the rules hold for any
async def limited(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SlackState, Emulator, FakeClock]]:
    clock = FakeClock()
    state = SlackState(clock=clock.now, burst=request.param)
    for name in ("one", "two", *(f"c{i}" for i in range(40))):
        state.add_channel(name)
    state.users["U1"] = {"name": "one"}
    emulator = await start_emulator(state)
    yield state, emulator, clock
    await emulator.close()


async def _call(http: aiohttp.ClientSession, emulator: Emulator, method: str, **args: object) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {emulator.state.token}"}
    async with http.post(f"{emulator.api_url}{method}", json=args, headers=headers) as resp:
        return resp.status, resp.headers.get("Retry-After", "")


async def test_posting_is_one_a_second_per_channel_after_the_burst(
    limited: tuple[SlackState, Emulator, FakeClock],
) -> None:
    state, emulator, clock = limited
    burst = state.burst
    async with aiohttp.ClientSession() as http:
        answers = [await _call(http, emulator, "chat.postMessage", channel="#one", text="x") for _ in range(burst + 3)]
        assert [s for s, _ in answers] == [200] * burst + [429] * 3
        assert {r for _, r in answers[burst:]} == {"1"}  # the next token comes within a second
        assert (await _call(http, emulator, "chat.postMessage", channel="#two", text="x"))[0] == 200  # its own
        assert state.limits.early == 2  # the two calls after the first 429, before its Retry-After passed
        clock.advance(1)
        assert (await _call(http, emulator, "chat.postMessage", channel="#one", text="x"))[0] == 200
        assert (await _call(http, emulator, "chat.postMessage", channel="#one", text="x"))[0] == 429
        clock.advance(60)  # a minute of quiet refills the burst, never beyond it
        statuses = [
            (await _call(http, emulator, "chat.postMessage", channel="#one", text="x"))[0] for _ in range(burst)
        ]
        assert statuses == [200] * burst
    assert len([m for m in state.messages if m.channel == state.channel("one").id]) == 2 * burst + 1  # type: ignore[union-attr]


async def test_the_workspace_takes_a_few_hundred_posts_a_minute_across_channels(
    limited: tuple[SlackState, Emulator, FakeClock],
) -> None:
    state, emulator, clock = limited
    async with aiohttp.ClientSession() as http:
        ok = 0
        for _ in range(60):  # one post a second in each of 40 channels: within every channel's own limit
            for i in range(40):
                ok += (await _call(http, emulator, "chat.postMessage", channel=f"#c{i}", text="x"))[0] == 200
            clock.advance(1)
    rate = POSTS_PER_WORKSPACE_PER_MINUTE
    assert rate <= ok <= rate + state.limits.capacity(rate)  # the workspace's 300 a minute, and its burst


async def test_tiered_methods_take_their_rate_per_minute(limited: tuple[SlackState, Emulator, FakeClock]) -> None:
    state, emulator, clock = limited
    async with aiohttp.ClientSession() as http:
        for method in ("chat.update", "views.publish", "users.info", "usergroups.users.list"):
            ok = 0
            for _ in range(480):  # two minutes, four calls a second
                ok += (await _call(http, emulator, method, user="U1", user_id="U1"))[0] != 429
                clock.advance(0.25)
            rate = PER_MINUTE[method]
            # at most the rate and a burst; at least nearly the rate (a full bucket drops what arrives between calls)
            assert 0.9 * 2 * rate <= ok <= 2 * rate + state.limits.capacity(rate), method


async def test_a_fault_or_a_limit_off_is_for_measuring_only() -> None:
    clock = FakeClock()
    state = SlackState(clock=clock.now, rate_limited=False)
    state.add_channel("one")
    emulator = await start_emulator(state)
    try:
        async with aiohttp.ClientSession() as http:
            statuses = {
                (await _call(http, emulator, "chat.postMessage", channel="#one", text="x"))[0] for _ in range(50)
            }
    finally:
        await emulator.close()
    assert statuses == {200} and state.limits.limited == 0
