"""kill -9 while `hitl serve` records Approve all on a group card: every member is decided once or not at all, the
person was told nothing the store does not hold, and the next process's card offers the rest, which a second Approve
all decides. No member is decided twice."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import MessageRef
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.engine.storage.paging import every_pending
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message, SlackState
from tests.backends import fresh_store_url
from tests.bot.conftest import CONFIG, SECRET, serve_env, spawn_serve, wait_healthy, workspace
from tests.bot.test_answer_crash import recorded
from tests.ports import free_port
from tests.processes import stopped
from tests.waiting import eventually

FLOOD = 300


async def _statuses(url: str, ids: list[str]) -> dict[str, tuple[Status, int]]:
    """Each member's status and how many ``decided`` entries its audit holds."""
    return {
        approval_id: (a.status, sum(1 for e in entries if e.event == "decided"))
        for approval_id, (a, entries) in (await recorded(url, ids)).items()
    }


def _kill_at_first_decision(url: str, serve: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``serve`` as soon as the SQLite file at ``url`` holds an approved approval (read every millisecond:
    a group of a hundred or more is recorded in a fraction of a second)."""
    deadline = time.monotonic() + 30
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"), timeout=5)) as db:
        while time.monotonic() < deadline:
            if db.execute("SELECT 1 FROM approvals WHERE status = 'approved' LIMIT 1").fetchone():
                serve.send_signal(signal.SIGKILL)
                return
            time.sleep(0.001)
    raise AssertionError("no member was recorded within 30 s")


async def _biggest_group(url: str, state: SlackState) -> tuple[Message, list[str]] | None:
    """The biggest group card in #refund-approvals and its members, once every approval is on a message."""
    channel = state.channel("refund-approvals")
    assert channel is not None
    store = open_store(url)
    try:
        if any(m is None for m in [await store.messages.get(a.id) async for a in every_pending(store.approvals)]):
            return None
        cards = [m for m in state.messages if m.channel == channel.id and not m.thread_ts and not m.ephemeral_to]
        sized = [(m, await store.messages.shown_on(MessageRef(channel=m.channel, ts=m.ts))) for m in cards]
        return max(sized, key=lambda pair: len(pair[1]))
    finally:
        await store.close()


async def test_killed_while_approve_all_is_recorded_no_member_is_lost_or_decided_twice(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_store_url("sqlite", request, tmp_path, tag="groups")
    store = open_store(url)
    try:  # an agent process, without Slack: a flood queued before hitl serve starts
        svc = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
        for i in range(FLOOD):
            args = {"order_id": f"{81000 + i}", "customer_id": f"C-{5000 + i}", "amount": 10 + i % 30}
            p = await svc.propose(ProposeRequest("refund", args, session_id="ses_group_crash", requester="agent:riley"))
            assert p.approval is not None
    finally:
        await store.close()
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=url, config=CONFIG, SHOP_DB=str(tmp_path / "shop.db"))
    http = aiohttp.ClientSession()
    try:
        port = free_port()
        first = spawn_serve(env, tmp_path, port, log="first.log")
        try:
            await wait_healthy(port, first)
            card, ids = await eventually(lambda: _biggest_group(url, state), what="every card posted", timeout=30)
            assert len(ids) >= 20
            slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            killer = asyncio.ensure_future(asyncio.to_thread(_kill_at_first_decision, url, first))
            assert (await slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
            await killer  # SIGKILL the moment the first member is recorded, while the rest are being recorded
            await asyncio.to_thread(first.wait, 20)
        finally:
            if first.poll() is None:
                first.kill()
        after_kill = await _statuses(url, ids)
        assert all(n == (1 if s is Status.APPROVED else 0) for s, n in after_kill.values())  # once, or not at all
        recorded = sum(s is Status.APPROVED for s, _ in after_kill.values())
        members = len(ids)
        told = [m.text for m in state.messages if m.ephemeral_to == "U_SUPPORT1"]
        assert all(f"Approved {members} of {members}" in t for t in told)  # told only once every one was recorded
        assert 0 < recorded < members, recorded  # killed mid-way: some recorded, the rest not

        port = free_port()
        second = spawn_serve(env, tmp_path, port, log="second.log")
        try:
            await wait_healthy(port, second)
            slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            left = members - recorded

            def redrawn() -> Message | None:
                now = state.by_ts(card.channel, card.ts)  # the card clicked, as the second process draws it
                want = f"{left} of {members} need approval" if left else f"{members} approved"
                return now if now is not None and want in now.text else None

            card = await eventually(redrawn, what="the card as the store has it", timeout=30)
            if left:
                assert (await slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200

                async def all_recorded() -> bool:
                    return all(s is Status.APPROVED for s, _ in (await _statuses(url, ids)).values())

                await eventually(all_recorded, what="the rest approved", timeout=30)
        finally:
            await stopped(second, grace=20)
    finally:
        await http.close()
        await emulator.close()
    final = await _statuses(url, ids)
    assert all(s is Status.APPROVED and n == 1 for s, n in final.values()), final  # every one, once
    assert state.limits.early == 0
