"""`hitl mcp` as a real process in front of a real upstream MCP server (tests/mcp/upstream.py, effects in a SQLite
ledger), reached with the SDK's own client over stdio or streamable HTTP; reviewers decide through the same store."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hitl.api.tokens import token_hash
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).with_name("upstream.py")

CONFIG = """
requester: agent:desktop
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
policy:
  allowed_tools: [look_up_order]
  tools:
    refund: {{tier: approve, role: support}}
    delete_customer: {{tier: approve, role: support}}
    crash: {{tier: approve, role: support}}
    send_receipt: {{tier: notify}}
    pay: {{tier: approve, role: support}}
mcp:
  session: desktop-1
  wait: {wait}
  servers:
    shop:
      command: [{python}, {upstream}]
      env: {{HITL_TEST_LEDGER: {ledger}, HITL_TEST_RECEIPTS: {receipts}}}
api:
  tokens:
    - {{name: alice, sha256: {alice}, reviewer: "agent:alice", scopes: [propose]}}
    - {{name: bob, sha256: {bob}, reviewer: "agent:bob", scopes: [propose]}}
    - {{name: reader, sha256: {reader}, reviewer: U_SUPPORT2, scopes: [read]}}
"""
CLIENTS = {"alice": "tok-mcp-alice", "bob": "tok-mcp-bob", "reader": "tok-mcp-reader"}
"""Each HTTP client's bearer token (hitl.yaml keeps their hashes): alice and bob may propose, the reader may not."""


@dataclass
class Shop:
    """The store, the reviewers' service and the upstream's ledger, as a test sees them."""

    tmp: Path
    env: dict[str, str]
    store: Store
    service: ApprovalService

    def effects(self) -> list[str]:
        ledger = self.tmp / "ledger.db"
        if not ledger.exists():
            return []
        with sqlite3.connect(ledger) as db:
            return [r[0] for r in db.execute("SELECT what FROM effects")]

    async def pending(self, *, count: int = 1) -> list[Approval]:
        """The pending approvals once ``count`` exist (the gateway creates them from another process)."""

        async def created() -> list[Approval] | None:
            items = (await self.store.approvals.list_pending(limit=50)).items
            return items if len(items) >= count else None

        return await eventually(created, what=f"{count} approvals from the gateway")

    async def decide(self, approval: Approval, kind: DecisionKind, **kw: Any) -> Approval:
        return await self.service.decide(DecideRequest(approval.id, "U_SUPPORT1", kind, via="slack", **kw))

    @asynccontextmanager
    async def client(
        self, *, http_port: int | None = None, token: str | None = CLIENTS["alice"]
    ) -> AsyncIterator[ClientSession]:
        """The SDK's client on `hitl mcp` (a new gateway process per stdio client, as desktop assistants do); over
        HTTP with ``token`` as its bearer token (None: none sent)."""
        async with AsyncExitStack() as stack:
            if http_port is None:
                params = StdioServerParameters(
                    command=sys.executable, args=["-m", "hitl", "mcp"], env=self.env, cwd=str(self.tmp)
                )
                read, write = await stack.enter_async_context(stdio_client(params))
            else:
                url = f"http://127.0.0.1:{http_port}/mcp"
                headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
                read, write = await stack.enter_async_context(streamable_http_client(url, http_client=http))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            yield session


def make_shop(tmp: Path, *, wait: str, extra: str = "", policy: str = "") -> Shop:
    """The gateway's world in ``tmp``; ``extra`` more hitl.yaml, ``policy`` more lines of its policy section."""
    config = tmp / "hitl.yaml"
    hashes = {name: token_hash(token) for name, token in CLIENTS.items()}
    text = CONFIG.format(
        wait=wait,
        python=sys.executable,
        upstream=UPSTREAM,
        ledger=tmp / "ledger.db",
        receipts=tmp / "receipts.json",
        **hashes,
    )
    text = text.replace("policy:\n", "policy:\n" + policy, 1)
    config.write_text(text + extra)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HITL_")},
        "PYTHONPATH": str(ROOT),
        "HITL_STORE": f"sqlite:///{tmp}/hitl.db",
        "HITL_CONFIG": str(config),
    }
    store = SqliteStore(tmp / "hitl.db")
    service = ApprovalService.from_config(load_config(config), store=store, clock=SystemClock())
    return Shop(tmp, env, store, service)


@pytest.fixture
async def shop(tmp_path: Path) -> AsyncIterator[Shop]:
    s = make_shop(tmp_path, wait="20s")
    yield s
    await s.store.close()


@pytest.fixture
async def impatient_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """A gateway that waits one second for a reviewer before answering "pending review"."""
    s = make_shop(tmp_path, wait="1s")
    yield s
    await s.store.close()


def text_of(result: Any) -> str:
    """The text of a tool call's answer."""
    assert isinstance(result, types.CallToolResult)
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
