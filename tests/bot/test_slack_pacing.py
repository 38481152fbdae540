"""Under Slack's rate limits (the stand-in enforces them), the bot paces itself: nothing is lost, nothing calls
while a ``Retry-After`` runs, a hold reaches every replica, urgent calls jump the queue, proposals never wait on
Slack, and an episode of 429s is one log line. Slack, the pacer and the approvals share one fake clock: the tests
count calls instead of waiting."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from hitl.bot.outbound.pacer import Pacer
from hitl.bot.views.controls import ACTION_TRUST
from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE
from hitl.engine.domain.records import MessageRef
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.runtime.compose import compose
from hitl.engine.storage.sqlite import SqliteStore
from hitl.sandbox.rate_limits import SlackLimits
from hitl.sandbox.webapi import Message, SlackState
from hitl.testing import FakeClock
from tests.bot.conftest import CONFIG, Harness, start, stop, workspace
from tests.waiting import eventually

REFUND = {"customer_id": "C-1", "amount": 5}
T = TypeVar("T")


def limited_workspace(clock: FakeClock, burst: int) -> SlackState:
    state = workspace()
    state.clock = clock.now
    state.limits = SlackLimits(clock.now, burst=burst)
    return state


@pytest.fixture(params=[1, 10])  # the stand-in's burst (Slack publishes none): nothing here depends on it
async def paced(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    state = limited_workspace(clock, request.param)
    h = await start(SqliteStore(tmp_path / "paced.db"), clock, state=state, pace_clock=clock)
    try:
        yield h
    finally:
        await run_clock(h, lambda: h.rt.bot.side.pacer.waiting == 0)
        await stop(h)


def pacer_of(h: Harness) -> Pacer:
    return h.rt.bot.side.pacer


def one_card_each(h: Harness) -> None:
    """Group cards off (``slack.group: false``): the tests of the pace itself count a card per approval."""
    notifier = h.rt.ctx.notifier
    notifier.floor.spec = notifier.floor.spec.model_copy(update={"group": False})


async def run_clock(h: Harness, done: Callable[[], bool], *, step: float = 1.0, most: int = 2000) -> int:
    """Move the shared clock ``step`` at a time (waking the paced calls) until ``done()``; returns the steps.

    Before each move the bot has made the calls the last one allowed and waits for the clock again (the pacer is
    settled): simulated time passes only as Slack's limits make the bot wait, however long the process waited for
    a CPU."""
    pacer = pacer_of(h)
    for steps in range(most):
        await asyncio.sleep(0.01)  # work the pacer does not see (a Home tab's debounce) gets its turn too
        await eventually(lambda: pacer.settled, what="the calls the last step allowed to be made", interval=0.005)
        if done():
            return steps
        h.clock.advance(step)
        pacer_of(h).clock_moved()
    raise AssertionError(f"not done after {most} steps of {step} s")


def carded(h: Harness) -> list[str]:
    """The approval ids of the cards in every channel (a flood escalates some to finance's)."""
    return [m.text.split("(")[-1].rstrip(")") for ch in ("refund-approvals", "finance-approvals") for m in h.cards(ch)]


async def clocked(h: Harness, work: Awaitable[T]) -> T:
    """``work``, with the shared clock moving until it is done (a call may wait for Slack's pace)."""
    task = asyncio.ensure_future(work)
    await run_clock(h, task.done, most=200)
    return await task


def posts_per_second(h: Harness, channel: str) -> list[float]:
    """When each accepted post into ``channel`` was made (the message's ts is the fake clock's second)."""
    ch = h.state.channel(channel)
    assert ch is not None
    return sorted(int(m.ts.split(".")[0]) for m in h.state.messages if m.channel == ch.id and not m.ephemeral_to)


async def flood(h: Harness, n: int) -> None:
    """Agent processes create ``n`` approvals with no notifier; the sweep queues every card, the pacer sends them at
    about one a second into the channel (a flood escalates some to finance's), and the stand-in never has to
    refuse a call made too early. The simulated seconds it takes follow from Slack's limits alone."""
    one_card_each(h)
    agent = compose(store=h.rt.store, clock=h.clock, config_path=str(CONFIG)).service  # no notifier
    ids = []
    for i in range(n):
        p = await agent.propose(ProposeRequest("refund", {**REFUND, "order_id": str(i)}, session_id=f"s{i}"))
        assert p.approval is not None
        ids.append(p.approval.id)
    start_at = h.clock.now()
    await h.rt.ctx.notifier.sweep(pages=2)
    steps = await run_clock(h, lambda: len(carded(h)) >= n)
    assert sorted(carded(h)) == sorted(ids)  # one card each
    for channel in ("refund-approvals", "finance-approvals"):
        times = posts_per_second(h, channel)
        for t in times:  # never more than the pacer's burst plus one a second, in any stretch of time
            assert len([u for u in times if t <= u < t + 10]) <= pacer_of(h).burst + 10
    busiest = max(len(posts_per_second(h, c)) for c in ("refund-approvals", "finance-approvals"))
    assert steps >= busiest - pacer_of(h).burst - 1 and h.clock.now() - start_at <= busiest + 20
    assert h.state.limits.early == 0  # no call while a Retry-After Slack gave was still running


async def test_a_flood_of_300_approvals_is_carded_at_slacks_pace_and_none_is_lost(paced: Harness) -> None:
    await flood(paced, 300)


@asynccontextmanager
async def cpu_taken(every_turn: float = 0.005) -> AsyncIterator[None]:
    """The event loop's thread loses ``every_turn`` seconds at each turn of the loop, as on a machine whose CPUs
    other processes keep busy: every step of the bot's work takes that much longer in real time."""

    async def others() -> None:
        while True:
            time.sleep(every_turn)  # blocking on purpose: the loop waits, as it waits for a CPU
            await asyncio.sleep(0)

    task = asyncio.create_task(others())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_flood_keeps_slacks_pace_in_simulated_time_while_the_process_waits_for_a_cpu(paced: Harness) -> None:
    """The clock moves only once the bot waits for it again: a slow turn of the loop costs real time, never
    simulated seconds (before, the clock moved on a real-time beat and a card took several of its seconds)."""
    async with cpu_taken():
        await flood(paced, 40)


async def test_proposals_never_wait_on_slack(paced: Harness) -> None:
    """With the clock frozen Slack takes a burst and no more; 50 proposals still all return (their cards wait in
    the bot), and each is carded once the clock moves."""
    one_card_each(paced)
    ids = []
    for i in range(50):
        p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": str(i)}, session_id=f"p{i}"))
        assert p.approval is not None
        ids.append(p.approval.id)
    assert len(carded(paced)) <= 2 * pacer_of(paced).burst  # Slack saw a burst per channel at most: none waited
    await run_clock(paced, lambda: len(carded(paced)) == 50)
    assert sorted(carded(paced)) == sorted(ids)
    assert paced.state.limits.early == 0


async def test_an_alert_goes_before_a_backlog_of_cards(paced: Harness) -> None:
    one_card_each(paced)
    for i in range(12):
        await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": str(i)}, session_id=f"q{i}"))
    await eventually(lambda: pacer_of(paced).waiting > 0, what="cards waiting for their turn")
    alert = asyncio.create_task(paced.rt.ctx.notifier.post_alert(":rotating_light: refunds look wrong"))
    await run_clock(paced, alert.done)
    await alert
    order = [m.text for m in paced.state.messages if not m.thread_ts and not m.ephemeral_to]
    assert len(order) < 12 + 1  # the alert is out while cards still wait
    await run_clock(paced, lambda: len(carded(paced)) == 12)


async def test_a_429_holds_the_method_for_every_task_and_replica_and_is_logged_once(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack answers one post with 429 and a 30 s Retry-After: neither replica posts into that channel again
    before it passes (the hold is in the store), the other channels go on, and the log says it once."""
    caplog.set_level(logging.INFO, logger="hitl.bot.outbound.pacer")
    state = limited_workspace(clock, 10)
    db = tmp_path / "shared.db"
    one = await start(SqliteStore(db), clock, state=state, pace_clock=clock, replica="one")
    two = await start(SqliteStore(db), clock, state=state, pace_clock=clock, replica="two")
    one_card_each(two)
    try:
        state.fail_next("chat.postMessage", status=429, retry_after=30)
        first = await one.service.propose(ProposeRequest("refund", {**REFUND, "order_id": "1"}, session_id="r1"))
        assert first.approval is not None
        await eventually(lambda: pacer_of(one).limited == 1, what="the 429")
        held = await one.rt.store.holds.active(now=clock.now())
        assert list(held) == ["chat.postMessage:#refund-approvals"] and held[
            "chat.postMessage:#refund-approvals"
        ] == pytest.approx(clock.now() + 30)
        for i in range(2, 6):  # the other replica's cards into the same channel
            p = await two.service.propose(ProposeRequest("refund", {**REFUND, "order_id": str(i)}, session_id=f"r{i}"))
            assert p.approval is not None
        await asyncio.sleep(0.6)  # the other replica reads the store's holds twice a second
        calls = len(state.calls_to("chat.postMessage"))
        held_from = first.approval.created_at
        await run_clock(one, lambda: clock.now() - held_from >= 29, step=1.0)
        assert len(state.calls_to("chat.postMessage")) == calls  # nobody called during the hold
        await run_clock(two, lambda: len(carded(one)) == 5)  # then every card goes out, once
        assert state.limits.early == 0 and state.limits.limited == 0  # the 429 was injected; no limit was hit
        lines = [r for r in caplog.records if "rate-limiting" in r.getMessage()]
        assert len(lines) == 1 and "30 s" in lines[0].getMessage()
    finally:
        await stop(two)
        await stop(one)


def publishes(h: Harness, user: str) -> int:
    return sum(1 for c in h.state.calls_to("views.publish") if c.args.get("user_id") == user and c.response["ok"])


async def test_a_home_tab_is_published_at_most_once_per_five_seconds_the_last_state_winning(paced: Harness) -> None:
    home = paced.rt.ctx.home
    for _ in range(300):  # one reviewer opening the tab 300 times
        assert (await paced.slack.home_opened("U_SUPPORT1")).status == 200
    assert publishes(paced, "U_SUPPORT1") == 1  # the clock has not moved: the rest wait for the tab's pace
    p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": "h1"}, session_id="h1"))
    assert p.approval is not None
    steps = await run_clock(paced, lambda: home.quiet and publishes(paced, "U_SUPPORT1") == 2)
    assert steps >= 5  # five seconds after the first
    assert "order “h1”" in str(paced.state.homes["U_SUPPORT1"]["blocks"])  # the state of that moment: the last
    paced.clock.advance(30)
    await asyncio.sleep(0.3)
    assert publishes(paced, "U_SUPPORT1") == 2  # nothing more to show: nothing more published


async def test_a_change_republishes_only_the_tabs_it_concerns(paced: Harness) -> None:
    home = paced.rt.ctx.home
    viewers = ("U_SUPPORT1", "U_SUPPORT2", "U_STRANGER")
    for user in viewers:
        await clocked(paced, paced.slack.home_opened(user))
    p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": "t1"}, session_id="t1"))
    assert p.approval is not None
    await run_clock(paced, lambda: len(carded(paced)) == 1 and home.quiet, most=50)
    assert publishes(paced, "U_STRANGER") == 1  # a card the stranger may not decide: their tab stays as it was
    card = next(m for m in paced.cards() if p.approval.id in m.text)
    assert (await clocked(paced, paced.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_TRUST))).status == 200
    await clocked(paced, paced.rt.ctx.notifier.flush())  # its card updated, and the tabs that follow the cards marked
    await run_clock(paced, lambda: home.quiet, most=50)
    before = {u: publishes(paced, u) for u in viewers}
    paced.clock.advance(10)
    reply = await clocked(paced, paced.slack.command("U_SUPPORT2", "general", "trust revoke refund"))
    assert reply.status == 200 and not await paced.rt.store.trust.all_active(now=paced.clock.now())
    await clocked(paced, paced.rt.ctx.notifier.flush())
    await run_clock(paced, lambda: home.quiet, most=50)
    after = {u: publishes(paced, u) for u in viewers}
    assert after["U_STRANGER"] == before["U_STRANGER"]  # trust in a tool they cannot decide is not on their tab
    assert after["U_SUPPORT1"] == before["U_SUPPORT1"] + 1 and after["U_SUPPORT2"] == before["U_SUPPORT2"] + 1


async def test_a_permalink_slack_garbles_degrades_that_line_not_the_tab(paced: Harness) -> None:
    p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": "g1"}, session_id="g1"))
    assert p.approval is not None
    await run_clock(paced, lambda: len(carded(paced)) == 1, most=50)
    paced.state.garble_next("chat.getPermalink")  # an HTML error page where JSON was expected
    assert (await clocked(paced, paced.slack.home_opened("U_SUPPORT1"))).status == 200
    await run_clock(paced, lambda: paced.rt.ctx.home.quiet, most=50)
    assert publishes(paced, "U_SUPPORT1") == 1
    blocks = str(paced.state.homes["U_SUPPORT1"]["blocks"])
    assert "order “g1”" in blocks and "/archives/" not in blocks  # listed, without its link


async def test_a_halt_notice_goes_before_a_backlog_of_card_updates(paced: Harness) -> None:
    one_card_each(paced)
    ids = []
    for i in range(5):
        p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": f"u{i}"}, session_id=f"u{i}"))
        assert p.approval is not None
        ids.append(p.approval.id)
    gone = await paced.service.propose(
        ProposeRequest("delete_customer", {"customer_id": "C-9"}, session_id="del", requester="agent:ops")
    )
    assert gone.approval is not None
    await run_clock(paced, lambda: len(carded(paced)) == 6)
    notifier = paced.rt.ctx.notifier
    before = len(paced.state.calls_to("chat.update"))
    for approval_id in ids:  # a backlog of routine updates: Tier 3 takes a burst, the rest wait their turn
        await notifier.approval_changed(await paced.rt.store.approvals.get(approval_id))
    await eventually(lambda: pacer_of(paced).waiting > 0, what="updates waiting for Slack's pace")
    await notifier.switch.halt("delete_customer", by="U_ADMIN")
    await notifier.watch_halts()
    await run_clock(paced, lambda: len(paced.state.calls_to("chat.update")) - before >= 6)
    updated = [c.args.get("ts") for c in paced.state.calls_to("chat.update")[before:]]
    halted_ts = next(m.ts for m in paced.cards() if gone.approval.id in m.text)
    routine = [i for i, ts in enumerate(updated) if ts != halted_ts]
    assert updated.index(halted_ts) < routine[-1]  # it did not wait for the whole backlog


async def test_a_card_post_waiting_out_a_long_retry_after_keeps_its_claim(paced: Harness) -> None:
    """Slack says wait 120 s, twice the claim's lease: the waiting post renews its claim, so no other replica takes
    it over and posts the card a second time."""
    notifier = paced.rt.ctx.notifier
    notifier.posts.renew_every = 0.02
    paced.state.fail_next("chat.postMessage", status=429, retry_after=120)
    p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": "L1"}, session_id="L1"))
    assert p.approval is not None
    await eventually(lambda: pacer_of(paced).limited == 1, what="Slack's 429")
    for _ in range(11):
        await tick_and_wait(paced, 10.0)
        claim = await paced.rt.store.ledger.get(f"notify:{p.approval.id}")
        assert claim is not None and claim.lease_until > paced.clock.now()  # still this replica's
    await run_clock(paced, lambda: len(carded(paced)) == 1)
    assert carded(paced) == [p.approval.id] and paced.state.limits.early == 0


async def tick_and_wait(h: Harness, seconds: float) -> None:
    h.clock.advance(seconds)
    pacer_of(h).clock_moved()
    await asyncio.sleep(0.1)  # a few renewals


async def reachable(h: Harness, ids: list[str]) -> set[str]:
    """The approvals a reviewer can reach from a message in Slack with live controls: its own card, or a group card
    it is a member of (the message is there, and has buttons while anything on it is pending)."""
    live = {m.ts for ch in ("refund-approvals", "finance-approvals") for m in h.cards(ch) if any_buttons(m)}
    refs = await asyncio.gather(*(h.rt.store.messages.get(i) for i in ids))
    return {i for i, ref in zip(ids, refs, strict=True) if ref is not None and ref.ts in live}


def any_buttons(m: Message) -> bool:
    return any(b.get("type") == "actions" and b.get("elements") for b in m.blocks)


async def test_300_from_one_session_reach_reviewers_as_a_few_group_cards_within_a_minute(paced: Harness) -> None:
    """Under Slack's limits, 300 approvals from one agent session: at most 30 messages; within 60 s of the first
    proposal every one is reachable from a message with live controls; Approve all on the biggest group is recorded
    and shown on its card within 10 s; Slack never had to refuse a call made too early."""
    first_at = paced.clock.now()
    ids = []
    for i in range(300):
        p = await paced.service.propose(ProposeRequest("refund", {**REFUND, "order_id": str(i)}, session_id="flood"))
        assert p.approval is not None
        ids.append(p.approval.id)
    while len(await reachable(paced, ids)) < 300:
        assert paced.clock.now() - first_at <= 60, f"{len(await reachable(paced, ids))} of 300 reachable after 60 s"
        await run_clock(paced, lambda: True, most=1)  # let what the last second allowed go out
        paced.clock.advance(1.0)
        pacer_of(paced).clock_moved()
    messages = [m for ch in ("refund-approvals", "finance-approvals") for m in paced.cards(ch)]
    assert len(messages) <= 30, [m.text for m in messages]

    biggest = max(messages, key=lambda m: int(m.text.split(" × ")[0]) if " × " in m.text else 1)
    members = await paced.rt.store.messages.shown_on(MessageRef(channel=biggest.channel, ts=biggest.ts))
    assert len(members) >= 100
    finance = paced.state.channel("finance-approvals")
    role_member = "U_FIN1" if finance is not None and biggest.channel == finance.id else "U_SUPPORT1"
    clicked_at = paced.clock.now()
    click = asyncio.ensure_future(paced.slack.click(role_member, copy.deepcopy(biggest), ACTION_GROUP_APPROVE))

    n = len(members)
    done_text = {
        f"{n} × refund from agent:riley: {n} approved",
        f"{n} × refund from agent:riley: {n} of {n} need approval: {n} voted on, each still needs 1 more finance vote",
    }

    def shown() -> bool:  # the card says every member is decided (or, two approvers each, has its first vote)
        now = next(m for m in paced.state.messages if m.ts == biggest.ts and m.channel == biggest.channel)
        return click.done() and now.text in done_text

    await run_clock(paced, shown, most=10)
    assert (await click).status == 200
    assert paced.clock.now() - clicked_at <= 10
    decided = [await paced.rt.store.approvals.get(i) for i in members]
    assert all(len(a.approvers) == 1 for a in decided)  # recorded: one vote each (a quorum of two still waits)
    await clocked(paced, paced.settle())  # the rest of the card updates, at Slack's pace
    assert paced.state.limits.early == 0
