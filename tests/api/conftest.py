"""`hitl serve` on 127.0.0.1 (Slack emulator, both stores) with API tokens in its hitl.yaml, and an HTTP client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from hitl.api import token_hash
from hitl.engine.storage import open_store
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import CONFIG, ROOT, Harness, start, stop
from tests.refund_config import write_refund_config

TOKENS = {
    # name: (token, reviewer, scopes, extra)
    "sup1": ("tok-support-1", "U_SUPPORT1", ["read", "decide"], ""),
    "sup2": ("tok-support-2", "U_SUPPORT2", ["read", "decide"], ""),
    "fin1": ("tok-finance-1", "U_FIN1", ["read", "decide"], ""),
    "fin2": ("tok-finance-2", "U_FIN2", ["read", "decide"], ""),
    "reader": ("tok-reader", "U_SUPPORT2", ["read"], ""),
    "agent": ("tok-agent", "agent:remote", ["read", "propose", "run"], ""),
    "agent2": ("tok-agent-2", "agent:other", ["read", "propose"], ""),
    "emails": ("tok-emails-only", "U_SUPPORT1", ["read", "decide"], "tools: [send_email]"),
    "admin": ("tok-admin", "U_SUPPORT2", ["admin"], ""),
    "runner2": ("tok-runner-2", "agent:other-runner", ["read", "propose", "run"], ""),
    "emailrunner": ("tok-email-runner", "agent:remote", ["read", "propose", "run"], "tools: [send_email]"),
}


WEBHOOK_SECRET = "whsec-test-only"

PRACTICE = """
oversight:
  practice:
    delay: 0
    tools: {refund: 1.0}
    defects:
      refund:
        - {name: wrong_customer, set: {customer_id: "C-0000"}, says: "the customer is not the order's"}
"""
"""hitl.yaml's oversight section that gives every refund a practice twin (a wrong customer planted)."""


def api_config(tmp: Path, *, extra: str = "", webhook: str | None = None, edit: Callable[[str], str] = str) -> Path:
    lines = ["api:", "  workflows:", f"    refund: {ROOT / 'examples' / 'refund' / 'workflow.yaml'}"]
    if webhook:
        lines += ["  webhooks:", f"    - {{url: '{webhook}', secret_env: HITL_TEST_WEBHOOK_SECRET}}"]
    lines.append("  tokens:")
    for name, (token, reviewer, scopes, more) in TOKENS.items():
        lines.append(f"    - {{name: {name}, sha256: {token_hash(token)}, reviewer: '{reviewer}', scopes: {scopes}}}")
        if more:
            lines[-1] = lines[-1][:-1] + f", {more}}}"
    path = tmp / "hitl.yaml"
    write_refund_config(path, edit(CONFIG.read_text()) + "\n".join(lines) + "\n" + extra)
    return path


@dataclass
class Receiver:
    """A webhook subscriber on 127.0.0.1: records every delivery; answers ``fail`` times with 500 first."""

    url: str = ""
    fail: int = 0
    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def hook(request: web.Request) -> web.Response:
            self.got.append((dict(request.headers), await request.read()))
            if self.fail > 0:
                self.fail -= 1
                return web.Response(status=500)
            return web.Response(status=204)

        app = web.Application()
        app.router.add_post("/hook", hook)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/hook"  # type: ignore[union-attr]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.got]


@dataclass
class Api:
    h: Harness
    config: Path
    hooks: Receiver

    @property
    def url(self) -> str:
        return f"{self.h.bot_url}/api/v1"

    async def call(
        self, method: str, path: str, *, as_: str | None = "sup1", json: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        headers = dict(kw.pop("headers", {}))
        if as_ is not None:
            headers["Authorization"] = f"Bearer {TOKENS[as_][0]}"
        async with self.h.http.request(method, self.url + path, json=json, headers=headers, **kw) as resp:
            body = await resp.json(content_type=None)
            self.last_headers = resp.headers
            return resp.status, body


@asynccontextmanager
async def sqlite_api(
    tmp_path: Path, clock: FakeClock, *, extra: str = "", hooks: bool = False, edit: Callable[[str], str] = str
) -> AsyncIterator[Api]:
    """`hitl serve` with the API on one SQLite store, for tests where the store does not matter (``extra``: more
    hitl.yaml; ``hooks``: a webhook subscriber to every event; ``edit``: changes the example's hitl.yaml first).
    Set ``SHOP_DB`` (and, with hooks, ``HITL_TEST_WEBHOOK_SECRET``) first."""
    receiver = Receiver()
    if hooks:
        await receiver.start()
    config = api_config(tmp_path, extra=extra, webhook=receiver.url if hooks else None, edit=edit)
    h = await start(SqliteStore(tmp_path / "api.db"), clock, config=config)
    try:
        yield Api(h, config, receiver)
    finally:
        await stop(h)
        if receiver.runner is not None:
            await receiver.runner.cleanup()


@asynccontextmanager
async def shop_api(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> AsyncIterator[Api]:
    """:func:`sqlite_api` (``options`` passed on) with the refund example's shop keeping its database in
    ``tmp_path`` (``SHOP_DB`` set for this test)."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    async with sqlite_api(tmp_path, clock, **options) as made:
        yield made


async def trusted_refund(api: Api) -> None:
    """The agent token proposes a refund in session ``s1`` and a reviewer trusts it (a grant for ``agent:remote``)."""
    args = {"order_id": "1", "customer_id": "C-1", "amount": 5}
    body = {"session": "s1", "tool": "refund", "idempotency_key": "k1", "args": args}
    status, asked = await api.call("POST", "/proposals", as_="agent", json=body)
    a = asked["approval"]
    bound = {"expected_version": a["version"], "action_hash": a["action_hash"]}
    status, _ = await api.call("POST", f"/approvals/{a['id']}/decisions", json={"decision": "trust", **bound})
    assert status == 200


def refund_proposal(session: str, key: str, args: dict[str, Any]) -> dict[str, Any]:
    """The body of ``POST /proposals`` asking a refund with ``args`` in ``session`` under idempotency key ``key``."""
    return {"session": session, "tool": "refund", "args": args, "idempotency_key": key}


async def pending_refund(api: Api, key: str, amount: int) -> str:
    """A refund of ``amount`` the agent token (``agent:remote``) proposes in session ``s-<key>`` under idempotency
    key ``key`` (support decides it; finance one over 500): its pending approval's id."""
    args = {"order_id": "78291", "customer_id": "C-1", "amount": amount}
    body = {"session": f"s-{key}", "tool": "refund", "idempotency_key": key, "args": args}
    status, asked = await api.call("POST", "/proposals", as_="agent", json=body)
    assert status == 200 and asked["verdict"] == "pending", asked
    return str(asked["approval"]["id"])


@pytest.fixture
async def practice_api(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Api]:
    """`hitl serve` with the API on SQLite, every refund getting a practice twin (:data:`PRACTICE`)."""
    async with shop_api(tmp_path, clock, monkeypatch, extra=PRACTICE) as made:
        yield made


@pytest.fixture(params=BACKENDS)
async def api(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    store = open_store(fresh_store_url(request.param, request, tmp_path, tag="api"))
    monkeypatch.setenv("HITL_TEST_WEBHOOK_SECRET", WEBHOOK_SECRET)
    hooks = Receiver()
    await hooks.start()
    config = api_config(tmp_path, webhook=hooks.url)
    h = await start(store, clock, config=config)
    h.rt.webhooks.lease = 0.0  # a delivery not yet due is looked at again on the next sweep, not after 30 s
    yield Api(h, config, hooks)
    await stop(h)
    assert hooks.runner is not None
    await hooks.runner.cleanup()


__all__ = [
    "PRACTICE",
    "TOKENS",
    "WEBHOOK_SECRET",
    "Api",
    "Receiver",
    "api_config",
    "pending_refund",
    "refund_proposal",
    "shop_api",
    "sqlite_api",
    "trusted_refund",
]
