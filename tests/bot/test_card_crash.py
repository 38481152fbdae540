"""kill -9 while `hitl serve` works through a backlog of cards at Slack's pace, the instant Slack takes a card (before
the process hears the answer, so before it records where the card is): the cards not posted yet are the pending
approvals themselves, so the next process posts each of them; the one Slack took unrecorded is found by its metadata
in the channel's history; none is posted twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message
from tests.backends import fresh_store_url
from tests.bot.conftest import CONFIG, serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.processes import stopped
from tests.refund_config import write_refund_config
from tests.waiting import eventually

CARDS = 10


async def test_killed_mid_backlog_every_card_is_posted_once(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # One store: the claims that make it exact are the ledger's, which the conformance suites hold to on every store;
    # the card in flight when the process died waits out its claim's lease (POST_LEASE) before it is posted.
    url = fresh_store_url("sqlite", request, tmp_path, tag="cards")
    store = open_store(url)
    try:  # an agent process, without Slack: the backlog is there before hitl serve starts
        svc = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
        ids = []
        for i in range(CARDS):
            args = {"order_id": f"{79000 + i}", "customer_id": f"C-{i}", "amount": 20 + i}
            p = await svc.propose(ProposeRequest("refund", args, session_id=f"ses_backlog_{i}"))
            assert p.approval is not None
            ids.append(p.approval.id)
    finally:
        await store.close()
    state = workspace()
    emulator = await start_emulator(state)
    config = tmp_path / "hitl.yaml"  # a card each: ten to post, one a second; the channel by id, as the docs say
    channel = state.channel("#refund-approvals")
    assert channel is not None
    text = CONFIG.read_text().replace('channel: "#refund-approvals"', f"channel: {channel.id}\n  group: false")
    write_refund_config(config, text)
    env = serve_env(state, emulator, store=url, config=config)

    def carded() -> list[str]:
        return [m.text.split("(")[-1].rstrip(")") for m in state.messages if not m.thread_ts and not m.ephemeral_to]

    first: subprocess.Popen[bytes] | None = None
    taken: list[Message] = []

    def kill_as_slack_takes_the_fourth(event: str, payload: Any) -> None:
        # Slack has stored the card; its answer is not written yet: the process dies before it could record it.
        if event == "message" and isinstance(payload, Message) and payload.metadata and first is not None:
            if len(carded()) == 4 and not taken:
                taken.append(payload)
                os.kill(first.pid, signal.SIGKILL)

    state.listeners.append(kill_as_slack_takes_the_fourth)
    try:
        port = free_port()
        first = spawn_serve(env, tmp_path, port, log="first.log")
        try:
            await wait_healthy(port, first)
            await eventually(lambda: bool(taken), what="the fourth card, at Slack's pace", timeout=30)
            await asyncio.to_thread(first.wait, 20)
        finally:
            if first.poll() is None:
                first.kill()
        assert len(carded()) < CARDS  # killed with cards still to post
        unrecorded = taken[0]
        assert unrecorded.metadata is not None
        (approval_id,) = unrecorded.metadata["event_payload"]["approvals"].split()
        port = free_port()
        second = spawn_serve(env, tmp_path, port, log="second.log")
        store = open_store(url)
        try:
            await wait_healthy(port, second)
            await eventually(lambda: len(carded()) >= CARDS, what="every card", timeout=60)
            # The card Slack took unrecorded waits out its post's lease; then the next process records it.
            await eventually(lambda: store.messages.get(approval_id), what="the unrecorded card found", timeout=60)
            await asyncio.sleep(1.5)  # a sweep or two more: nothing is posted again
            ref = await store.messages.get(approval_id)
            assert ref is not None and (ref.channel, ref.ts) == (unrecorded.channel, unrecorded.ts)
        finally:
            await store.close()
            await stopped(second, grace=20)
    finally:
        await emulator.close()
    assert sorted(carded()) == sorted(ids)  # each approval's card, once
    assert state.limits.early == 0
