"""Receipts through ``hitl mcp``: the gateway (its own process, holding no key) claims each approved call through
``hitl serve`` and hands the upstream MCP server the receipt in the ``tools/call`` request's ``_meta``; the upstream
(another process) pays only with a valid, unspent receipt for exactly that call. Called around the gateway, with no
receipt, with other arguments, or with a receipt spent before, it pays nothing."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hitl.api.tokens import token_hash
from hitl.engine.clocks import SystemClock
from hitl.engine.domain.models import DecisionKind
from hitl.engine.errors import ErrorCode
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts import MCP_META_KEY
from hitl.receipts.signing import new_key_pem
from tests.bot.conftest import Harness, start, stop
from tests.mcp.conftest import UPSTREAM, Shop, make_shop, text_of
from tests.ports import free_port

GATEWAY, REDEEMER = "tok-mcp-gateway", "tok-mcp-payments"
RECEIPTS = f"""    - {{name: gateway, sha256: {token_hash(GATEWAY)}, reviewer: "agent:desktop", scopes: [propose]}}
    - {{name: payments, sha256: {token_hash(REDEEMER)}, reviewer: svc:payments, scopes: [redeem], audience: payments}}
receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    pay: {{audience: payments}}
"""
PAYMENT = {"to": "V-1", "amount": 120}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Shop, Harness]]:
    """The gateway's world, and ``hitl serve`` on its store signing receipts; the gateway reaches it by its API."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    shop = make_shop(tmp_path, wait="20s", extra=RECEIPTS)
    h = await start(SqliteStore(tmp_path / "hitl.db"), SystemClock(), config=tmp_path / "hitl.yaml")  # type: ignore[arg-type]
    (tmp_path / "receipts.json").write_text(json.dumps({"hitl": h.bot_url, "token": REDEEMER}))
    shop.env.update({"HITL_API_URL": h.bot_url, "HITL_TOKEN": GATEWAY})
    try:
        yield shop, h
    finally:
        await stop(h)
        await shop.store.close()


async def _direct(shop: Shop, args: dict[str, Any], receipt: str | None) -> types.CallToolResult:
    """Call the upstream's ``pay`` around the gateway (its own stdio process), with ``receipt`` in ``_meta``."""
    env = {
        **shop.env,
        "HITL_TEST_LEDGER": str(shop.tmp / "ledger.db"),
        "HITL_TEST_RECEIPTS": str(shop.tmp / "receipts.json"),
    }
    params = StdioServerParameters(command=sys.executable, args=[str(UPSTREAM)], env=env, cwd=str(shop.tmp))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        meta = cast(types.RequestParamsMeta, {MCP_META_KEY: receipt}) if receipt else None
        result = await session.call_tool("pay", args, meta=meta)
        assert isinstance(result, types.CallToolResult)
        return result


async def test_the_upstream_gets_the_receipt_in_meta_and_pays_exactly_once(served: tuple[Shop, Harness]) -> None:
    shop, _ = served
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("pay", PAYMENT))
        (pending,) = await shop.pending()
        await shop.decide(pending, DecisionKind.APPROVE)
        result = await call
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("paid 120 to V-1 (rct_")
    assert shop.effects() == ["pay V-1 120"]
    (receipt,) = (shop.tmp / "receipts.seen").read_text().split()

    # Around the gateway: no receipt, the receipt for other arguments, the receipt again: nothing is paid.
    refused = [
        await _direct(shop, PAYMENT, None),
        await _direct(shop, {"to": "V-1", "amount": 1200}, receipt),
        await _direct(shop, PAYMENT, receipt),
    ]
    assert [r.is_error for r in refused] == [True, True, True]
    assert "receipt_required" in text_of(refused[0])
    assert "wrong_arguments" in text_of(refused[1])
    assert "already_redeemed" in text_of(refused[2])
    assert shop.effects() == ["pay V-1 120"]


async def test_without_hitl_serve_the_gateway_runs_nothing(served: tuple[Shop, Harness]) -> None:
    shop, _ = served
    shop.env["HITL_API_URL"] = f"http://127.0.0.1:{free_port()}"  # hitl serve out of reach: no receipt to be had
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("pay", PAYMENT))
        (pending,) = await shop.pending()
        await shop.decide(pending, DecisionKind.APPROVE)
        result = await call
    assert result.is_error and str(ErrorCode.RECEIPT_UNAVAILABLE) in text_of(result)
    assert shop.effects() == []
    assert (
        await shop.store.ledger.get(f"call:{pending.id}") is None
    )  # nothing claimed: it may run once hitl serve is back
