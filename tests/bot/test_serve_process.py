"""`hitl serve` as a real process: a run paused by `hitl run` gets its card, a signed click resumes it."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import CONFIG, ROOT, SECRET, serve_env, serve_process, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.processes import stop_process
from tests.waiting import eventually


async def test_serve_posts_the_card_and_resumes_the_cli_run(tmp_path: Path) -> None:
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(
        state,
        emulator,
        store=f"sqlite:///{tmp_path}/hitl.db",
        config=CONFIG,
        SHOP_DB=str(tmp_path / "shop.db"),
    )
    http = aiohttp.ClientSession()
    try:
        async with serve_process(env, tmp_path) as port:
            run = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "hitl",
                    "run",
                    str(ROOT / "examples/refund/workflow.yaml"),
                    "--var",
                    "order_id=78291",
                    "--var",
                    "amount=75",
                    "--json",
                ],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 4, run.stderr
            approval_id = json.loads(run.stdout)["approval_id"]

            def posted() -> Message | None:
                return next((m for m in state.messages if approval_id in m.text and not m.thread_ts), None)

            card = copy.deepcopy(await eventually(posted, what="the card hitl serve posts"))
            slack = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET)
            reply = await slack.click("U_SUPPORT1", card, ACTION_APPROVE)
            assert reply.status == 200

            def refunded() -> list[tuple[float]] | None:
                if not (tmp_path / "shop.db").exists():
                    return None
                with sqlite3.connect(tmp_path / "shop.db") as db:
                    refunds: list[tuple[float]] = db.execute("SELECT amount FROM refunds").fetchall()
                return (
                    refunds if refunds and any("completed" in m.text for m in state.messages if m.thread_ts) else None
                )

            assert await eventually(refunded, what="the refund and the thread's reply") == [(75.0,)]
            show = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "hitl", "show", approval_id, "--json"],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert json.loads(show.stdout)["status"] == "executed"
    finally:
        await http.close()
        await emulator.close()


def test_serve_refuses_to_start_without_a_signing_secret(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env.update({"PYTHONPATH": str(ROOT), "SLACK_BOT_TOKEN": "xoxb-x"})
    out = subprocess.run(
        [sys.executable, "-m", "hitl", "serve", "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "SLACK_SIGNING_SECRET is not set" in out.stderr


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_approval_another_process_creates_is_carded_without_waiting_for_a_sweep(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The sweep runs once a day here, so only the store's announcement can card the approval an agent process
    creates after `hitl serve` started (within the wait's budget, whatever the machine's load)."""
    url = fresh_store_url(backend, request, tmp_path, tag="new")
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=url, config=CONFIG, SWEEP_INTERVAL="86400")
    try:
        async with serve_process(env, tmp_path):
            await asyncio.sleep(0.3)  # past the sweep `hitl serve` makes as it starts
            store = open_store(url)
            try:
                svc = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
                asked = await svc.propose(
                    ProposeRequest(
                        "refund", {"order_id": "1", "customer_id": "C-7", "amount": 40}, session_id="s-agent"
                    )
                )
                assert asked.approval is not None
                shown = asked.approval.id
                await eventually(
                    lambda: any(shown in m.text for m in state.messages if not m.thread_ts),
                    what="the card",
                    interval=0.005,
                )
            finally:
                await store.close()
            assert any(asked.approval.id in m.text for m in state.messages), (tmp_path / "serve.log").read_text()
    finally:
        await emulator.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_serve_stops_on_a_signal_even_when_started_with_sigint_ignored(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """A background job, nohup and some CI runners start processes with SIGINT ignored: `hitl serve` installs its
    own handlers, so Ctrl-C and SIGTERM still stop it cleanly (exit 0) and promptly."""
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=CONFIG)
    port = free_port()
    try:
        ignored = lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)  # noqa: E731 - as the launcher starts it
        proc = spawn_serve(env, tmp_path, port, preexec_fn=ignored)
        try:
            await wait_healthy(port, proc)
        finally:
            code = await asyncio.to_thread(stop_process, proc, sig=sig, grace=5.0)
        assert code == 0, (tmp_path / "serve.log").read_text()
    finally:
        await emulator.close()


async def test_a_health_check_never_passes_on_another_process_holding_the_port(tmp_path: Path) -> None:
    """The harness's guard: when the port handed to a `hitl serve` is answered by another process (a port taken in
    the window between choosing and binding), the wait fails instead of letting the test judge the wrong server."""
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=f"sqlite:///{tmp_path}/hitl.db", config=CONFIG)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        async with serve_process(env, tmp_path) as port:
            with pytest.raises(AssertionError, match="served by another process"):
                await wait_healthy(port, idle)
    finally:
        stop_process(idle, grace=1.0)
        await emulator.close()
