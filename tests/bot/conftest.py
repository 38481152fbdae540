"""The bot served on 127.0.0.1 against the emulated Slack Web API, with requests signed as Slack signs them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from hitl.bot.server import app_runner, serve_locally
from hitl.bot.settings import BotSettings
from hitl.engine.ports import Clock, Store
from hitl.engine.storage import open_store
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts.signing import new_key_pem
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.rate_limits import SlackLimits
from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.webapi import Message, SlackState
from hitl.serve import Server, build_server
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.ports import free_port
from tests.processes import stopped
from tests.refund_config import write_refund_config
from tests.waiting import started

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"
SECRET = "test-signing-secret"
PEOPLE = ["U_SUPPORT1", "U_SUPPORT2", "U_FIN1", "U_FIN2", "U_FIN3", "U_STRANGER"]


def serve_env(state: SlackState, emulator: Emulator, *, store: str, config: Path, **extra: str) -> dict[str, str]:
    """The environment a `hitl serve` process needs to talk to the emulated Slack on 127.0.0.1."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLACK_BOT_TOKEN": state.token,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": emulator.api_url,
        "HITL_STORE": store,
        "HITL_CONFIG": str(config),
        "HITL_APPROVAL_CHANNEL": "#refund-approvals",
        "SWEEP_INTERVAL": "0.1",
        **extra,
    }
    env.pop("HITL_NOW", None)
    return env


async def wait_healthy(port: int, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until `hitl serve` on ``port`` answers /healthz (it is starting in another process). With ``proc``: until
    that process answers (its replica name carries its pid, or a worker's whose parent it is), failing at once when
    it exits: a health check must never pass on another process that happens to hold the port."""
    async with aiohttp.ClientSession() as http:

        async def healthy() -> bool:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"hitl serve for port {port} exited with code {proc.returncode} before serving")
            try:
                async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    if resp.status != 200:
                        return False
                    body = await resp.json()
            except aiohttp.ClientError:
                return False
            if proc is not None and not _is_or_under(_replica_pid(body), proc.pid):
                raise AssertionError(f"port {port} is served by another process than hitl serve {proc.pid}: {body}")
            return True

        await started(healthy, what=f"hitl serve on port {port} to answer /healthz", interval=0.025)


def _replica_pid(body: Any) -> int:
    """The pid in a /healthz answer's replica name (``kind:host:pid:id``); -1 when the answer names none (it is not
    `hitl serve`'s, and the caller says so)."""
    parts = str(body.get("replica", "") if isinstance(body, dict) else "").split(":")
    return int(parts[-2]) if len(parts) >= 4 and parts[-2].isdigit() else -1


def _is_or_under(pid: int, parent: int) -> bool:
    if pid == parent:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == parent  # the field after the state: the parent's pid


def spawn_serve(
    env: dict[str, str], cwd: Path, port: int, *args: str, log: str = "serve.log", **popen: Any
) -> subprocess.Popen[bytes]:
    """`hitl serve --port PORT` (with ``args``) started as a real process, its output in ``cwd/log``."""
    with (cwd / log).open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "hitl", "serve", "--port", str(port), *args],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            **popen,
        )


@asynccontextmanager
async def serve_process(env: dict[str, str], cwd: Path, *args: str) -> AsyncIterator[int]:
    """`hitl serve` (with ``args``) as a real process on a free port of 127.0.0.1 (its output in
    ``cwd/serve.log``); yields the port once it answers /healthz, and stops it after."""
    port = free_port()
    proc = spawn_serve(env, cwd, port, *args)
    try:
        await wait_healthy(port, proc)
        yield port
    finally:
        await stopped(proc, grace=20)


def workspace() -> SlackState:
    state = SlackState()
    state.add_channel("refund-approvals")
    state.add_channel("finance-approvals")
    state.add_channel("general")
    for user in PEOPLE:
        state.users[user] = {"name": user.lower(), "real_name": user.replace("_", " ").title(), "tz": "UTC"}
    return state


class Hurried:
    """Real time, run ``factor`` times faster. Slack's pace in tests that are not about it: the stand-in limits calls
    and the bot paces them on this clock, both, so every limit holds as it does in Slack, in a twentieth of the
    time (the pacing tests put both on a fake clock and count calls instead)."""

    def __init__(self, factor: float = 20.0) -> None:
        self.factor = factor
        self._wall, self._mono = time.time(), time.monotonic()

    def now(self) -> float:
        return self._wall + (time.monotonic() - self._mono) * self.factor


class _Settled:
    def __init__(self, service: Any, settle: Callable[[], Awaitable[None]]) -> None:
        object.__setattr__(self, "_service", service)
        object.__setattr__(self, "_settle", settle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._service, name, value)

    async def propose(self, *args: Any, **kwargs: Any) -> Any:
        out = await self._service.propose(*args, **kwargs)
        await self._settle()
        return out


@dataclass
class Harness:
    state: SlackState
    emulator: Emulator
    rt: Server
    slack: Dispatcher
    bot_url: str
    http: aiohttp.ClientSession
    clock: FakeClock
    runner: web.AppRunner
    store_url: str | None = None
    """``HITL_STORE`` for a command run against the store it serves (set by :func:`harness_on`)."""

    @property
    def service(self) -> Any:
        """The service itself (proposals through it are carded by the bot's workers, as Slack allows)."""
        return self.rt.runtime.contexts.default.service

    @property
    def svc(self) -> Any:
        """The service, each proposal followed by the bot's posting of what it queued (the card, an FYI): a
        proposal never waits on Slack, and these tests read Slack after it."""
        return _Settled(self.rt.runtime.contexts.default.service, self.settle)

    def cards(self, channel: str = "refund-approvals") -> list[Message]:
        ch = self.state.channel(channel)
        assert ch is not None
        return [
            m
            for m in self.state.messages
            if m.channel == ch.id and not m.ephemeral_to and not m.thread_ts and not self.is_fyi(m)
        ]

    def fyis(self, channel: str = "refund-approvals") -> list[Message]:
        """The FYI posts (a call that ran without review: a notify-tier call, or one a Trust let through)."""
        ch = self.state.channel(channel)
        assert ch is not None
        return [m for m in self.state.messages if m.channel == ch.id and self.is_fyi(m)]

    @staticmethod
    def is_fyi(m: Message) -> bool:
        return m.text.endswith("ran without review")

    def card_for(self, approval_id: str) -> Message:
        found = [m for m in self.state.messages if not m.ephemeral_to and not m.thread_ts and approval_id in m.text]
        assert len(found) == 1, [m.text for m in self.state.messages]
        return found[0]

    def ephemeral(self, user: str) -> list[Message]:
        return [m for m in self.state.messages if m.ephemeral_to == user]

    async def settle(self) -> None:
        await self.rt.ctx.wait_idle()
        await self.rt.ctx.notifier.flush()


async def start(
    store: Store,
    clock: FakeClock,
    *,
    state: SlackState | None = None,
    replica: str | None = None,
    config: Path = CONFIG,
    channel: str = "#refund-approvals",
    pace_clock: Clock | None = None,
) -> Harness:
    state = state or workspace()
    emulator = await start_emulator(state)
    settings = BotSettings(
        slack_bot_token=state.token,
        slack_signing_secret=SECRET,
        slack_api_url=emulator.api_url,
        hitl_config=str(config),
        hitl_approval_channel=channel,
    )
    if pace_clock is None:  # Slack's pace, the stand-in's limits and the bot's, on one hurried clock (see Hurried)
        pace_clock = Hurried()
        state.limits = SlackLimits(pace_clock.now, burst=state.burst)
    rt = await build_server(
        settings, store=store, clock=clock, replica=replica, retry_interval=0.01, pace_clock=pace_clock
    )
    runner = app_runner(rt.web_app(), shutdown_timeout=1.0)  # what `hitl serve` answers, the API included
    await runner.setup()
    port = await serve_locally(runner)
    bot_url = f"http://127.0.0.1:{port}"
    http = aiohttp.ClientSession()
    slack = Dispatcher(state, http, bot_url=f"{bot_url}/slack/events", signing_secret=SECRET)
    slack.after = rt.ctx.wait_idle  # the bot acks first; tests look at what it did after the ack
    return Harness(state, emulator, rt, slack, bot_url, http, clock, runner)


async def stop(h: Harness) -> None:
    await h.settle()  # let queued card updates land rather than cut them off mid-request
    await h.http.close()
    await h.runner.cleanup()
    await h.rt.close()
    await h.emulator.close()


@asynccontextmanager
async def harness_on(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, config: str
) -> AsyncIterator[Harness]:
    """A harness on the backend ``request`` is parametrized with, serving the hitl.yaml text ``config``."""
    path = tmp_path / "hitl.yaml"
    write_refund_config(path, config)
    url = fresh_store_url(request.param, request, tmp_path, tag="bot")
    h = await start(open_store(url), clock, config=path)
    h.store_url = url
    try:
        yield h
    finally:
        await stop(h)


def refund_harness_with(extra: str) -> Callable[..., Any]:
    """A fixture: a harness on each store (parametrized) serving the refund example's hitl.yaml followed by
    ``extra``, the example's shop keeping its database in the test's folder."""

    @pytest.fixture(params=BACKENDS)
    async def h(
        request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[Harness]:
        monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
        async with harness_on(request, tmp_path, clock, CONFIG.read_text() + extra) as harness:
            yield harness

    return h


@pytest.fixture(params=BACKENDS)
async def harness(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    store = open_store(fresh_store_url(request.param, request, tmp_path, tag="bot"))
    h = await start(store, clock)
    yield h
    await stop(h)


@pytest.fixture
async def sqlite_harness(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    h = await start(SqliteStore(tmp_path / "bot.db"), clock)
    yield h
    await stop(h)


@pytest.fixture(params=("sqlite", "redis"))
async def paying(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """`hitl serve` issuing receipts (its key in ``tmp_path``), on each store: the withdrawal tests' harness."""
    from tests.receipts.conftest import CONFIG as RECEIPTS_CONFIG  # here: that conftest imports this one

    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with harness_on(request, tmp_path, clock, RECEIPTS_CONFIG) as h:
        yield h
