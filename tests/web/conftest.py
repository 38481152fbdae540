"""What the web inbox's tests share: a real OpenID Connect provider (panva's oidc-provider on Node, installed by
scripts/ensure-node), a real `hitl serve` whose hitl.yaml signs people in there, the Slack stand-in it posts cards to,
and sign-in driven over HTTP as a browser does it."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import aiohttp
import pytest

from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.storage import open_store
from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.webapi import SlackState
from tests.bot.conftest import CONFIG, serve_env, spawn_serve, wait_healthy, workspace
from tests.ports import free_port
from tests.processes import stop_process, stopped
from tests.refund_config import write_refund_config
from tests.waiting import eventually, started

PROVIDER = Path(__file__).parent / "oidc"
CLIENT_SECRET = "test-client-secret-not-used-elsewhere"
TEAM = "T0TEST"


@dataclass
class Provider:
    """The OpenID Connect provider: its issuer URL, and its process."""

    issuer: str
    proc: subprocess.Popen[bytes]


def start_provider(tmp_path: Path, clients: list[dict[str, Any]]) -> Provider:
    """oidc-provider on a free port of 127.0.0.1 with ``clients`` registered (its output in provider.log)."""
    node = shutil.which("node")
    if node is None or not (PROVIDER / "node_modules" / "oidc-provider").exists():
        pytest.fail("the OpenID Connect provider is not installed: run scripts/ensure-node (make node)")
    port = free_port()
    with (tmp_path / "provider.log").open("w") as out:
        proc = subprocess.Popen(
            [node, str(PROVIDER / "provider.mjs"), str(port), json.dumps(clients)],
            cwd=PROVIDER,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Provider(f"http://127.0.0.1:{port}", proc)


async def provider_ready(p: Provider) -> None:
    """Until the provider answers its discovery document."""
    async with aiohttp.ClientSession() as http:

        async def answers() -> bool:
            if p.proc.poll() is not None:
                raise AssertionError(f"the OIDC provider exited with code {p.proc.returncode}")
            try:
                async with http.get(f"{p.issuer}/.well-known/openid-configuration") as r:
                    return r.status == 200
            except aiohttp.ClientError:
                return False

        await started(answers, what="the OpenID Connect provider to serve its discovery document")


@dataclass
class Inbox:
    """A running `hitl serve` with the web inbox, its provider and its Slack stand-in."""

    url: str
    issuer: str
    state: SlackState
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    """The `hitl serve` process (signalled by the tests of SIGHUP's reload)."""
    emulator: Emulator | None = None
    """The Slack stand-in's server (closed by the tests of a Slack that does not answer at all)."""


async def cli_run(inbox: Inbox, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`hitl ARGS` as a process on ``inbox``'s store and hitl.yaml, run in a thread so the test's loop (and the
    servers on it) go on meanwhile."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "hitl", *args],
        env=inbox.env,
        cwd=inbox.cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refunds(inbox: Inbox) -> list[tuple[float]] | None:
    """The amounts the refund example's shop has refunded, or None while it has refunded nothing (for waiting)."""
    with sqlite3.connect(inbox.cwd / "shop.db") as db:
        rows: list[tuple[float]] = db.execute("SELECT amount FROM refunds").fetchall()
    return rows or None


async def executed_with_trail(inbox: Inbox, approval_id: str) -> tuple[Approval, list[AuditEntry]]:
    """Once ``inbox``'s store records the approval ``approval_id`` as executed (its refund's outcome): the approval
    and its audit trail."""
    store = open_store(inbox.env["HITL_STORE"])
    try:

        async def executed() -> bool:
            return (await store.approvals.get(approval_id)).status is Status.EXECUTED

        await eventually(executed, what="the refund's outcome recorded")
        return await store.approvals.get(approval_id), await store.audit.entries(approval_id=approval_id)
    finally:
        await store.close()


def web_config(tmp_path: Path, public_url: str, issuer: str, extra: str = "") -> Path:
    """The refund example's hitl.yaml with a ``web:`` section signing people in at ``issuer``."""
    text = CONFIG.read_text() + (
        f"\nweb:\n  public_url: {public_url}\n  oidc:\n    issuer: {issuer}\n    client_id: hitl\n"
        f"    client_secret_env: HITL_OIDC_SECRET\n    slack_team_id: {TEAM}\n{extra}"
    )
    return write_refund_config(tmp_path / "hitl.yaml", text)


async def stop_served(proc: subprocess.Popen[bytes] | None, emulator: Emulator | None, provider: Provider) -> None:
    """Stop what a web inbox test started, as far as it got: `hitl serve`, the Slack stand-in, the provider."""
    if proc is not None:
        await stopped(proc, grace=20)
    if emulator is not None:
        await emulator.close()
    stop_process(provider.proc, grace=5)


@asynccontextmanager
async def serving(tmp_path: Path, *, edit: Callable[[str], str] = lambda text: text) -> AsyncIterator[Inbox]:
    """`hitl serve` with the web inbox, signing in at a real provider, posting cards to the Slack stand-in;
    ``edit`` changes its hitl.yaml's text first."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    clients = [
        {"client_id": "hitl", "client_secret": CLIENT_SECRET, "redirect_uris": [f"{public}/auth/callback"]},
        {"client_id": "other-app", "client_secret": "other-secret", "redirect_uris": ["http://127.0.0.1:9/cb"]},
    ]
    provider = start_provider(tmp_path, clients)
    state = workspace()
    emulator: Emulator | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        await provider_ready(provider)
        emulator = await start_emulator(state)
        config = web_config(tmp_path, public, provider.issuer)
        config.write_text(edit(config.read_text()))
        env = serve_env(
            state,
            emulator,
            store=f"sqlite:///{tmp_path}/hitl.db",
            config=config,
            SHOP_DB=str(tmp_path / "shop.db"),
            HITL_OIDC_SECRET=CLIENT_SECRET,
        )
        proc = spawn_serve(env, tmp_path, port)
        await wait_healthy(port, proc)
        yield Inbox(public, provider.issuer, state, env, tmp_path, proc, emulator)
    finally:
        await stop_served(proc, emulator, provider)


@pytest.fixture
async def inbox(tmp_path: Path) -> AsyncIterator[Inbox]:
    """`hitl serve` with the web inbox, signing in at a real provider, posting cards to the Slack stand-in."""
    async with serving(tmp_path) as running:
        yield running


def browser() -> aiohttp.ClientSession:
    """An HTTP client that keeps cookies for 127.0.0.1 as a browser does, and follows no redirect by itself."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def to_callback(http: aiohttp.ClientSession, inbox: Inbox, who: str, *, path: str = "/inbox") -> str:
    """Start a sign-in at ``path`` and sign in at the provider as ``who``: the callback address the provider
    sends the browser back to (not yet visited)."""
    async with http.get(f"{inbox.url}/auth/login", params={"next": path}, allow_redirects=False) as r:
        assert r.status == 303, await r.text()
        url = r.headers["Location"]
    return await at_provider(http, url, who, until=f"{inbox.url}/auth/callback")


async def at_provider(http: aiohttp.ClientSession, url: str, who: str, *, until: str) -> str:
    """Follow the provider's pages from ``url``, typing ``who`` at its login form, to the redirect to ``until``."""
    for _ in range(12):
        if url.startswith(until):
            return url
        async with http.get(url, allow_redirects=False) as r:
            if r.status in (302, 303):
                url = urljoin(url, r.headers["Location"])
                continue
            assert r.status == 200, (r.status, await r.text())
            form_action = urljoin(url, urlsplit(url).path)
        async with http.post(form_action, data={"login": who}, allow_redirects=False) as r:
            assert r.status in (302, 303), (r.status, await r.text())
            url = urljoin(url, r.headers["Location"])
    raise AssertionError(f"the provider never sent the browser back to {until}")


async def sign_in(http: aiohttp.ClientSession, inbox: Inbox, who: str, *, path: str = "/inbox") -> str:
    """Sign ``who`` in; the path the callback sent the browser to."""
    callback = await to_callback(http, inbox, who, path=path)
    async with http.get(callback, allow_redirects=False) as r:
        assert r.status == 303, (r.status, await r.text())
        return r.headers["Location"]


def query_of(url: str) -> dict[str, str]:
    """A URL's query parameters (each once)."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
