"""Proof through the real path: a payment service in its own process pays only with a valid, unspent receipt for
exactly that payment. An agent going through hitl (propose, a reviewer approves, claim) is paid exactly once; a
direct call without a receipt, one for other arguments or another tool, an expired one, a replayed one, and one
signed by another key are all refused, and nothing else is paid."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
from joserfc.jwk import OKPKey

from hitl.receipts import args_sha256
from hitl.receipts.signing import SigningKeys, new_key_pem
from tests.bot.conftest import Harness
from tests.receipts.conftest import AGENT, Payments, api, approve

PAYMENT = {"to": "V-1", "amount": 120}


async def _receipt_through_hitl(h: Harness, args: dict[str, Any], key: str) -> str:
    """What an agent does: propose, wait for a reviewer (here: one approves through the API), claim."""
    proposal = {"session": "ses_pay", "tool": "pay", "args": args, "idempotency_key": key}
    pending = await api(h, "POST", "/proposals", AGENT, proposal)
    a = pending["approval"]
    await approve(h, a)
    claimed = await api(
        h, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, {"action_hash": a["execute_hash"]}
    )
    assert claimed["acquired"] and claimed["receipt"]
    return str(claimed["receipt"])


async def test_only_a_valid_unspent_receipt_for_exactly_that_payment_pays(
    hitl: Harness, payments: Payments, tmp_path: Path
) -> None:
    h, url = hitl, payments.url
    async with aiohttp.ClientSession() as http:

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
    assert payments.paid() == [{"tool": "pay", "args": PAYMENT, "jti": jti}]
    redeemed = [e for e in await h.svc.store.audit.entries() if e.event == "redeemed"]
    assert len(redeemed) == 2 and redeemed[0].actor == "api:payments"  # the first use, and its retry
