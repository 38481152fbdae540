"""Proof through the real path: a payment service in its own process pays only with a valid, unspent receipt for
exactly that payment. An agent going through hitl (propose, a reviewer approves, claim) is paid exactly once; a
direct call without a receipt, one for other arguments or another tool, an expired one, a replayed one, and one
signed by another key are all refused, and nothing else is paid."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from joserfc.jwk import OKPKey

from hitl.api import token_hash
from hitl.engine.clocks import SystemClock
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipt_keys import SigningKeys, new_key_pem
from hitl.receipts import args_sha256
from tests.bot.conftest import ROOT, Harness, start, stop
from tests.bot.payments import PAY_SCHEMA
from tests.ports import free_port
from tests.processes import stop_process
from tests.waiting import eventually

AGENT, FIN1, SERVICE = "tok-agent-pay", "tok-fin1-pay", "tok-payments-service"
CONFIG = (
    """
requester: agent:riley
roles:
  finance: [U_FIN1, U_FIN2]
policy:
  tools:
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
    pay: {{audience: payments}}
    refund: {{audience: payments}}
api:
  tokens:
    - {{name: agent, sha256: {token_hash(AGENT)}, reviewer: "agent:payer", scopes: [propose, read]}}
    - {{name: fin1, sha256: {token_hash(FIN1)}, reviewer: U_FIN1, scopes: [read, decide]}}
    - {{name: payments, sha256: {token_hash(SERVICE)}, reviewer: svc:payments, scopes: [redeem], audience: payments}}
"""
)
PAYMENT = {"to": "V-1", "amount": 120}


@pytest.fixture
async def hitl(tmp_path: Path) -> AsyncIterator[Harness]:
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    # Real time: the protected service checks the receipts against its own clock, as a real one would.
    h = await start(SqliteStore(tmp_path / "hitl.db"), SystemClock(), config=tmp_path / "hitl.yaml")  # type: ignore[arg-type]
    try:
        yield h
    finally:
        await stop(h)


async def _api(h: Harness, method: str, path: str, token: str, body: dict[str, Any] | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with h.http.request(method, f"{h.bot_url}/api/v1{path}", json=body, headers=headers) as r:
        assert r.status == 200, (path, r.status, await r.text())
        return await r.json()


async def _receipt_through_hitl(h: Harness, args: dict[str, Any], key: str) -> str:
    """What an agent does: propose, wait for a reviewer (here: one approves through the API), claim."""
    proposal = {"session": "ses_pay", "tool": "pay", "args": args, "idempotency_key": key}
    pending = await _api(h, "POST", "/proposals", AGENT, proposal)
    a = pending["approval"]
    decision = {"decision": "approve", "expected_version": a["version"], "action_hash": a["action_hash"]}
    await _api(h, "POST", f"/approvals/{a['id']}/decisions", FIN1, decision)
    claimed = await _api(
        h, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, {"action_hash": a["execute_hash"]}
    )
    assert claimed["acquired"] and claimed["receipt"]
    return str(claimed["receipt"])


async def test_only_a_valid_unspent_receipt_for_exactly_that_payment_pays(hitl: Harness, tmp_path: Path) -> None:
    h, ledger, port = hitl, tmp_path / "ledger.jsonl", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.receipts.protected_service", str(port), h.bot_url, SERVICE, str(ledger)],
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

            await eventually(up, what="the payment service to answer", timeout=30)

            async def pay(
                args: dict[str, Any], receipt: str | None, *, path: str = "/pay", key: str | None = None
            ) -> tuple[int, str]:
                headers = {
                    **({"Hitl-Receipt": receipt} if receipt else {}),
                    **({"Idempotency-Key": key} if key else {}),
                }
                async with http.post(f"{url}{path}", json=args, headers=headers) as r:
                    body = await r.json()
                    return r.status, str(body.get("error") or body.get("jti"))

            receipt = await _receipt_through_hitl(h, PAYMENT, "call-1")
            assert await pay(PAYMENT, None) == (401, "receipt_required")  # a direct call around hitl
            assert await pay({**PAYMENT, "amount": 1200}, receipt) == (403, "wrong_arguments")
            assert await pay(PAYMENT, receipt, path="/refund") == (403, "wrong_tool")
            status, jti = await pay(PAYMENT, receipt, key="pay-1")
            assert status == 200  # paid, once
            assert await pay(PAYMENT, receipt, key="pay-1") == (200, jti)  # the same use retried: not paid again
            assert await pay(PAYMENT, receipt, key="pay-2") == (409, "already_redeemed")  # a replay
            assert await pay(PAYMENT, receipt) == (409, "already_redeemed")

            # Signed with the deployment's own key but expired; signed by another key: refused before any spending.
            keys = SigningKeys(OKPKey.import_key((tmp_path / "receipt.pem").read_bytes()))
            old = time.time() - 3600
            claims = {
                "iss": "https://hitl.example.com",
                "sub": "apr_X",
                "jti": "rct_old",
                "iat": int(old),
                "exp": int(old + 300),
                "tool": "pay",
                "args_sha256": args_sha256(PAYMENT),
                "basis": "approval",
                "aud": "payments",
                "approvers": ["U_FIN1"],
                "requester": "agent:payer",
            }
            assert await pay(PAYMENT, keys.sign(claims)) == (403, "expired")
            fresh = {**claims, "jti": "rct_other", "iat": int(time.time()), "exp": int(time.time() + 300)}
            other = SigningKeys(OKPKey.import_key(new_key_pem()))
            assert await pay(PAYMENT, other.sign(fresh)) == (403, "unknown_key")
            # Signed with the deployment's key but never issued by hitl (a stolen key, say): not spendable.
            assert await pay(PAYMENT, keys.sign(fresh)) == (409, "invalid_receipt")
    finally:
        stop_process(proc)
    paid = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert paid == [{"tool": "pay", "args": PAYMENT, "jti": jti}]
    redeemed = [e for e in await h.svc.store.audit.entries() if e.event == "redeemed"]
    assert len(redeemed) == 2 and redeemed[0].actor == "api:payments"  # the first use, and its retry
