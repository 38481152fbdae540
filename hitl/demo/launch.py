"""Start the whole sandbox: the emulated workspace and its page, and the real bot pointed at it."""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from hitl.bot.server import serve_locally
from hitl.bot.settings import BotSettings
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import HitlConfig, load_config
from hitl.engine.ports import Clock, Store
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.page import SandboxPage
from hitl.sandbox.rate_limits import SlackLimits
from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.sign_in import SandboxSignIn
from hitl.sandbox.webapi import SlackState
from hitl.serve import Server, build_server

__all__ = ["STRANGER", "Sandbox", "start_sandbox", "workspace_for"]

STRANGER = "U_STRANGER"


def workspace_for(config: HitlConfig) -> tuple[SlackState, list[dict[str, Any]]]:
    """Channels from hitl.yaml's slack section, people from its roles, plus a stranger."""
    state = SlackState()
    names = {config.slack.channel or "#approvals", *config.slack.channels.values(), "#general"}
    for name in sorted(names):
        state.add_channel(name.lstrip("#"))
    people: list[dict[str, Any]] = []
    for role, ids in sorted(config.roles.items()):
        for uid in ids:
            if uid.startswith("S"):
                continue  # user groups are not people
            found = next((p for p in people if p["id"] == uid), None)
            if found is None:
                people.append({"id": uid, "name": uid.lower().replace("u_", "", 1), "roles": [role]})
            else:
                found["roles"].append(role)
    # The sandbox opens as the first person: someone who may decide the cards of the default channel (a role no
    # slack.channels entry routes elsewhere), so the first Approve a newcomer presses is theirs to give.
    routed = set(config.slack.channels)
    people.sort(key=lambda p: not (set(p["roles"]) - routed))
    people.append({"id": STRANGER, "name": "stranger", "roles": []})
    for p in people:
        state.users[p["id"]] = {"name": p["name"], "real_name": p["name"].title(), "tz": "UTC"}
    return state, people


@dataclass
class Sandbox:
    """A running sandbox: the Slack stand-in, its page, and the real bot against it."""

    state: SlackState
    page: SandboxPage
    emulator: Emulator
    rt: Server
    dispatcher: Dispatcher
    http: aiohttp.ClientSession
    bot_runner: web.AppRunner
    config_path: str

    bot_url: str
    """``hitl serve`` as the sandbox runs it: Slack's endpoints, and the HTTP API at ``/api/v1`` with the receipts'
    public keys at ``/.well-known/jwks.json`` (``HITL_API_URL`` for an agent or a protected service)."""

    @property
    def url(self) -> str:
        return self.emulator.url

    async def close(self) -> None:
        await self.http.close()
        await self.bot_runner.cleanup()
        await self.rt.close()
        await self.emulator.close()
        if self.sign_in is not None:  # the copy of hitl.yaml written with its web: section
            Path(self.config_path).unlink(missing_ok=True)

    sign_in: SandboxSignIn | None = None
    """The stand-in's "Sign in with Slack", when the sandbox serves the web inbox (``web_inbox=True``)."""


SIGN_IN_SECRET_ENV = "HITL_SANDBOX_OIDC_SECRET"
"""Where the sandbox's web inbox reads its client secret at the stand-in's provider (made once per process)."""


def _free_port() -> int:
    """A port of 127.0.0.1 free now (the web inbox's address must be known before hitl serve starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_web(config_path: str | Path, public_url: str, issuer: str, team: str) -> Path:
    """A copy of ``config_path`` with a ``web:`` section signing in at the stand-in's provider (a hidden file beside
    it, removed when the sandbox closes)."""
    text = Path(config_path).read_text()
    web_section = (
        f"\nweb:\n  public_url: {public_url}\n  oidc:\n    issuer: {issuer}\n    client_id: hitl-sandbox\n"
        f"    client_secret_env: {SIGN_IN_SECRET_ENV}\n    slack_team_id: {team}\n"
    )
    original = Path(config_path).resolve()
    try:  # beside the original: the paths it names (a key_file, workflows) are read from its folder
        fd, name = tempfile.mkstemp(prefix=".hitl-sandbox-", suffix=".yaml", dir=original.parent)
    except OSError:  # a folder this process may not write (an installed example): the temporary folder
        fd, name = tempfile.mkstemp(prefix="hitl-sandbox-", suffix=".yaml")
    with os.fdopen(fd, "w") as copy:
        copy.write(text + web_section)
    return Path(name)


async def start_sandbox(
    *,
    config_path: str | Path,
    store: Store | None = None,
    store_url: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    clock: Clock | None = None,
    worker: bool = True,
    api_port: int = 0,
    web_inbox: bool = False,
) -> Sandbox:
    """Start the sandbox: the Slack stand-in on 127.0.0.1, its page, and ``hitl serve``'s bot wired to it, served
    as ``hitl serve`` serves it (the API and the receipts' keys too) on ``api_port`` (default: a free one).
    ``clock`` is the approvals' (and the messages' times); Slack's pace, the stand-in's and the bot's, runs on
    real time, as it does in Slack. ``web_inbox``: also the web inbox (``web:`` added to a copy of the hitl.yaml, unless
    it has one), signing in at the stand-in's "Sign in with Slack" as the person picked under *Acting as*."""
    config = load_config(config_path)
    state, people = workspace_for(config)
    state.limits = SlackLimits(time.time, burst=state.burst)
    main_channel = state.channel(config.slack.channel or "#approvals")
    page = SandboxPage(state, people, default_channel=main_channel.id if main_channel else None)
    sign_in = None
    if web_inbox and config.web is None:
        api_port = api_port or _free_port()
        public = f"http://127.0.0.1:{api_port}"
        os.environ.setdefault(SIGN_IN_SECRET_ENV, secrets.token_urlsafe(24))
        now = clock.now if clock is not None else time.time
        sign_in = SandboxSignIn(
            state, "hitl-sandbox", os.environ[SIGN_IN_SECRET_ENV], f"{public}/auth/callback", now=now
        )
    routes = page.routes() + (sign_in.routes() if sign_in is not None else [])
    emulator = await start_emulator(state, host=host, port=port, extra_routes=routes)
    if sign_in is not None:
        config_path = _with_web(config_path, f"http://127.0.0.1:{api_port}", emulator.url, state.team_id)
    secret = secrets.token_hex(16)
    channel = config.slack.channel or "#approvals"
    settings = BotSettings(
        slack_bot_token=state.token,
        slack_signing_secret=secret,
        slack_api_url=emulator.api_url,
        hitl_config=str(config_path),
        hitl_approval_channel=channel,
        sweep_interval=1.0,
    )
    if store_url:
        settings = settings.model_copy(update={"hitl_store": store_url})
    rt = await build_server(settings, store=store, clock=clock, replica="sandbox-bot", pace_clock=SystemClock())
    bot_runner = web.AppRunner(rt.web_app(), shutdown_timeout=1.0)
    await bot_runner.setup()
    bot_port = await serve_locally(bot_runner, api_port)
    http = aiohttp.ClientSession()
    dispatcher = Dispatcher(state, http, bot_url=f"http://127.0.0.1:{bot_port}/slack/events", signing_secret=secret)
    dispatcher.after = rt.ctx.wait_idle
    page.dispatcher = dispatcher
    if worker:
        rt.background.start()
    return Sandbox(
        state,
        page,
        emulator,
        rt,
        dispatcher,
        http,
        bot_runner,
        str(config_path),
        f"http://127.0.0.1:{bot_port}",
        sign_in,
    )
