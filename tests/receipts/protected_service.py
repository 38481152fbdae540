"""A protected payment service, as a team behind a tool would write it: its own aiohttp app in its own process. It
pays only with a valid receipt for exactly the payment asked (checked with hitl's published keys alone), spent once
through hitl's redeem endpoint; every payment it makes is a line in its ledger file.

Run: ``python -m tests.receipts.protected_service PORT HITL_URL REDEEM_TOKEN LEDGER``.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from aiohttp import web

from hitl.receipts import ReceiptError, RemoteKeys, verify

AUDIENCE = "payments"


def _redeem(hitl: str, token: str, receipt: str, redemption: str | None) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"receipt": receipt, **({"redemption": redemption} if redemption else {})}).encode()
    request = urllib.request.Request(
        f"{hitl}/api/v1/receipts/redeem",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:  # noqa: S310 - hitl on 127.0.0.1
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def app(hitl: str, token: str, ledger: Path) -> web.Application:
    keys = RemoteKeys(f"{hitl}/.well-known/jwks.json")

    def handler(tool: str) -> Any:
        async def pay(request: web.Request) -> web.Response:
            args = await request.json()
            receipt = request.headers.get("Hitl-Receipt", "")
            if not receipt:
                return web.json_response({"error": "receipt_required"}, status=401)
            try:
                claims = verify(receipt, tool=tool, args=args, keys=keys, audience=AUDIENCE)
            except ReceiptError as exc:
                return web.json_response({"error": str(exc.code)}, status=403)
            status, answer = _redeem(hitl, token, receipt, request.headers.get("Idempotency-Key"))
            if status != 200:
                return web.json_response({"error": answer.get("error", {}).get("code", str(status))}, status=409)
            if answer["first"]:
                with ledger.open("a") as f:
                    f.write(json.dumps({"tool": tool, "args": args, "jti": claims["jti"]}) + "\n")
            return web.json_response({"paid": True, "jti": claims["jti"]})

        return pay

    application = web.Application()
    application.router.add_post("/pay", handler("pay"))
    application.router.add_post("/refund", handler("refund"))
    return application


if __name__ == "__main__":
    port, hitl_url, redeem_token, ledger_file = sys.argv[1:5]
    web.run_app(app(hitl_url, redeem_token, Path(ledger_file)), host="127.0.0.1", port=int(port), print=None)
