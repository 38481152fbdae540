"""Socket Mode through Bolt's aiohttp handler, against the emulator's websocket."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hitl.bot.server import serve_socket
from hitl.bot.settings import BotSettings
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.clocks import SystemClock
from hitl.engine.domain.models import Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.storage.sqlite import SqliteStore
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.socket import SocketHub
from hitl.sandbox.webapi import SlackState
from hitl.serve import Server, build_server
from hitl.testing import FakeClock
from tests.bot.conftest import CONFIG, workspace
from tests.waiting import eventually


@dataclass
class SocketBot:
    state: SlackState
    hub: SocketHub
    server: Server


@asynccontextmanager
async def socket_bot(tmp_path: Path) -> AsyncIterator[SocketBot]:
    """`hitl serve --socket` against the emulator's websocket, on a fresh SQLite store."""
    state = workspace()
    hub = SocketHub()
    emulator = await start_emulator(state, socket=hub)
    settings = BotSettings(
        slack_bot_token=state.token,
        slack_app_token=hub.app_token,
        slack_api_url=emulator.api_url,
        hitl_config=str(CONFIG),
        hitl_approval_channel="#refund-approvals",
    )
    store = SqliteStore(tmp_path / "s.db")
    rt = await build_server(settings, store=store, clock=FakeClock(), socket_mode=True, pace_clock=SystemClock())
    serving = asyncio.create_task(serve_socket(rt.bot, hub.app_token))
    try:
        yield SocketBot(state, hub, rt)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await rt.close()
        await emulator.close()


async def test_socket_mode_click_and_command(tmp_path: Path) -> None:
    async with socket_bot(tmp_path) as bot, aiohttp.ClientSession() as http:
        state, rt = bot.state, bot.server
        slack = Dispatcher(state, http, bot_url="unused", signing_secret="unused")
        slack.socket = bot.hub
        slack.after = rt.ctx.wait_idle
        p = await rt.runtime.contexts.default.service.propose(
            ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": 9}, session_id="sock")
        )
        assert p.approval is not None
        await rt.ctx.notifier.flush()  # the card is posted by the bot's worker
        card = copy.deepcopy(next(m for m in state.messages if p.approval.id in m.text))
        await slack.click("U_STRANGER", card, ACTION_APPROVE)
        await slack.command("U_SUPPORT1", "general", "pending")
        await slack.click("U_SUPPORT1", card, ACTION_APPROVE)

        clicked = p.approval.id

        async def approved() -> bool:
            return (await rt.store.approvals.get(clicked)).status is Status.APPROVED

        await eventually(approved, what="the click to approve", interval=0.01)
        assert (await rt.store.approvals.get(p.approval.id)).status is Status.APPROVED
        assert any("not a reviewer" in m.text for m in state.messages if m.ephemeral_to == "U_STRANGER")
        assert any(p.approval.id in str(m.blocks) for m in state.messages if m.ephemeral_to == "U_SUPPORT1")


async def test_socket_mode_checks_payloads_as_http_does(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Bolt hands Socket Mode payloads over already parsed: they get the same checks before any listener runs."""
    async with socket_bot(tmp_path) as bot:
        hub, rt = bot.hub, bot.server
        p = await rt.runtime.contexts.default.service.propose(
            ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": 9}, session_id="sock")
        )
        assert p.approval is not None
        value = f"{p.approval.id}|{p.approval.version}|{p.approval.action_hash}"
        click = {
            "type": "block_actions",
            "user": {"id": "U_SUPPORT1"},
            "actions": [{"action_id": ACTION_APPROVE, "value": value, "block_id": "b"}],
            "container": {"type": "message"},
            "trigger_id": "1.2.3",
        }
        hostile = [
            {**click, "user": {"id": "U_SUPPORT1", "name": "x\udc80"}},  # a lone surrogate, as JSON can carry one
            {**click, "extra": json.loads("[" * 40 + "]" * 40)},  # nested past the bound
            {**click, "user": {"id": 12}},  # a field of the wrong type
        ]

        async def unacknowledged(payload: dict[str, Any]) -> None:
            with pytest.raises(TimeoutError):  # refused: Bolt does not acknowledge it, and nothing runs
                await hub.deliver("interactive", payload, timeout=1.0)

        with caplog.at_level(logging.WARNING, logger="hitl.bot.requests.payloads"):
            # Together: each still waits its own second for the acknowledgement that must not come (one after
            # another, the test waited three).
            await asyncio.gather(*(unacknowledged(payload) for payload in hostile))
        await rt.ctx.wait_idle()
        assert (await rt.store.approvals.get(p.approval.id)).status is Status.PENDING
        assert len([r for r in caplog.records if "refused an unreadable Slack request" in r.message]) == 3
        await hub.deliver("interactive", click)  # the same click, well formed, is decided
        await rt.ctx.wait_idle()
        assert (await rt.store.approvals.get(p.approval.id)).status is Status.APPROVED
