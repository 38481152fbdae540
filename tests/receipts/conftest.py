"""What the receipt tests through the real path share: ``hitl serve`` (the bot's harness, API included) with
receipts configured and its key in a file, and the protected payment service in its own process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hitl.api import token_hash
from hitl.engine.clocks import SystemClock
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts.signing import new_key_pem
from tests.bot.conftest import ROOT, Harness, start, stop
from tests.bot.payments import PAY_SCHEMA
from tests.ports import free_port
from tests.processes import stopped
from tests.waiting import started

AGENT, FIN1, SERVICE = "tok-agent-pay", "tok-fin1-pay", "tok-payments-service"
AGENT_PROCESS = "tok-agent-process"
"""The token of an agent process proposing in-process as ``hitl.yaml``'s requester (its receipts come through it)."""
CONFIG = (
    """
requester: agent:riley
roles:
  finance: [U_FIN1, U_FIN2]
policy:
  tools:
    look_up:
      tier: auto
    pay:
      tier: approve
      role: finance
      timeout: 1h
"""
    + PAY_SCHEMA
    + f"""receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    pay: {{audience: payments, always: true}}
    refund: {{audience: payments}}
    look_up: {{always: true}}
api:
  tokens:
    - {{name: agent, sha256: {token_hash(AGENT)}, reviewer: "agent:payer", scopes: [propose, read]}}
    - {{name: riley, sha256: {token_hash(AGENT_PROCESS)}, reviewer: "agent:riley", scopes: [propose]}}
    - {{name: fin1, sha256: {token_hash(FIN1)}, reviewer: U_FIN1, scopes: [read, decide]}}
    - {{name: payments, sha256: {token_hash(SERVICE)}, reviewer: svc:payments, scopes: [redeem], audience: payments}}
"""
)


@asynccontextmanager
async def receipts_served(tmp_path: Path, config: str) -> AsyncIterator[Harness]:
    """``hitl serve`` on a SQLite file in ``tmp_path``, ``config`` its ``hitl.yaml``, signing with a new key in
    ``tmp_path/receipt.pem``."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    (tmp_path / "hitl.yaml").write_text(config)
    # Real time: the protected service checks the receipts against its own clock, as a real one would.
    h = await start(SqliteStore(tmp_path / "hitl.db"), SystemClock(), config=tmp_path / "hitl.yaml")  # type: ignore[arg-type]
    try:
        yield h
    finally:
        await stop(h)


@asynccontextmanager
async def own_connection(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """A process's own connection to the SQLite store ``hitl serve`` uses in ``tmp_path`` (as an agent process or a
    worker beside it opens one)."""
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def hitl(tmp_path: Path) -> AsyncIterator[Harness]:
    """``hitl serve`` on a SQLite file in ``tmp_path``, signing with ``tmp_path/receipt.pem``."""
    async with receipts_served(tmp_path, CONFIG) as h:
        yield h


async def api(h: Harness, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
    """One call of ``hitl serve``'s API that must answer 200: its JSON."""
    headers = {"Authorization": f"Bearer {token}"}
    async with h.http.request(method, f"{h.bot_url}/api/v1{path}", json=body, headers=headers) as r:
        assert r.status == 200, (path, r.status, await r.text())
        return await r.json()


async def approve(h: Harness, approval: dict[str, Any], *, kind: str = "approve", on_view: bool = False) -> None:
    """A finance reviewer approves ``approval`` (its API view) through the API (``kind``: ``trust`` to trust it;
    ``on_view``: on the view it shows, whose digest the decision's audit entry and the receipt then keep)."""
    decision = {"decision": kind, "expected_version": approval["version"], "action_hash": approval["action_hash"]}
    if on_view:
        decision["view_digest"] = approval["view_digest"]
    await api(h, "POST", f"/approvals/{approval['id']}/decisions", FIN1, decision)


@dataclass(frozen=True)
class Payments:
    """The protected payment service: where it answers, and its ledger of payments made."""

    url: str
    ledger: Path

    def paid(self) -> list[dict[str, Any]]:
        """Every payment made, in order."""
        import json

        return [json.loads(line) for line in self.ledger.read_text().splitlines()] if self.ledger.exists() else []


@pytest.fixture
async def payments(hitl: Harness, tmp_path: Path) -> AsyncIterator[Payments]:
    """The payment service in its own process, checking receipts with ``hitl``'s published keys."""
    ledger, port = tmp_path / "ledger.jsonl", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.receipts.protected_service", str(port), hitl.bot_url, SERVICE, str(ledger)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:

            async def up() -> bool:
                try:
                    async with http.post(f"{url}/pay", json={}) as r:
                        return r.status == 401
                except aiohttp.ClientError:
                    return False

            await started(up, what="the payment service to answer")
        yield Payments(url, ledger)
    finally:
        await stopped(proc)
