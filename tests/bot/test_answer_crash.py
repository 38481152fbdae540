"""Recorded, then answered: `hitl serve` killed with SIGKILL the instant Slack gets its answer to a click or a
command loses no decision, on both stores.

Each trial starts a real `hitl serve`, sends one signed request, and kills the process as soon as the response
status line arrives (before the body is read, before any follow-up the server does after answering). The store is
then read directly: every request Slack got a 200 for has its decision recorded and audited.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_TRUST
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import CONFIG, SECRET, serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port

TRIALS = 10


async def _propose(url: str, n: int) -> list[Approval]:
    store = open_store(url)
    try:
        svc = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
        out = []
        for i in range(n):
            p = await svc.propose(
                ProposeRequest(
                    "refund",
                    {"order_id": f"{78000 + i}", "customer_id": f"C-{1000 + i}", "amount": 120 + i},
                    session_id=f"ses_crash_{i}",
                )
            )
            assert p.approval is not None
            out.append(p.approval)
        return out
    finally:
        await store.close()


async def recorded(url: str, ids: list[str]) -> dict[str, tuple[Approval, list[AuditEntry]]]:
    """Each of ``ids`` as the store at ``url`` keeps it after the crash: the approval and its audit trail."""
    store = open_store(url)
    try:
        return {i: (await store.approvals.get(i), await store.audit.entries(approval_id=i)) for i in ids}
    finally:
        await store.close()


async def _read(url: str, ids: list[str]) -> dict[str, tuple[Status, list[str]]]:
    return {
        approval_id: (a.status, [f"{e.event}:{e.outcome}:{e.detail}" for e in trail])
        for approval_id, (a, trail) in (await recorded(url, ids)).items()
    }


@pytest.mark.parametrize("backend", BACKENDS)
async def test_killed_the_instant_slack_is_answered_loses_no_decision(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = fresh_store_url(backend, request, tmp_path, tag="crash")
    approvals = await _propose(url, TRIALS + 2)
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=url, config=CONFIG, SHOP_DB=str(tmp_path / "shop.db"))
    answered: dict[str, int] = {}
    http = aiohttp.ClientSession()
    try:
        for i, a in enumerate(approvals):
            port = free_port()
            proc = spawn_serve(env, tmp_path, port, log=f"serve{i}.log")
            try:
                await wait_healthy(port, proc)
                slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
                slack.on_answer = lambda _status, proc=proc: proc.send_signal(signal.SIGKILL)  # nothing after runs
                if i < TRIALS:  # clicks: Approve, and Trust on every third
                    button = ACTION_TRUST if i % 3 == 2 else ACTION_APPROVE
                    value = f"{a.id}|{a.version}|{a.action_hash}"
                    card = Message(ts="1.0", channel="C0", user="B0HITLBOT", text=a.id, blocks=_buttons(button, value))
                    reply = await slack.click("U_SUPPORT1", card, button)
                else:  # the slash command decides the same way
                    reply = await slack.command("U_SUPPORT2", "refund-approvals", f"approve {a.id}")
                answered[a.id] = reply.status
            finally:
                if proc.poll() is None:
                    proc.kill()
                await asyncio.to_thread(proc.wait, 20)
    finally:
        await http.close()
        await emulator.close()
    assert set(answered.values()) == {200}, answered
    found = await _read(url, list(answered))
    lost = {
        k: v for k, v in found.items() if v[0] is not Status.APPROVED or not any(e.startswith("decided") for e in v[1])
    }
    assert lost == {}, f"{len(lost)} of {len(found)} answered decisions were lost: {lost}"


def _buttons(action_id: str, value: str) -> list[dict[str, object]]:
    return [
        {
            "type": "actions",
            "block_id": "hitl_actions",
            "elements": [
                {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": "x"}, "value": value}
            ],
        }
    ]
