"""A payment service that pays only with a receipt from hitl. It checks the receipt with
hitl's published keys alone, spends it once through hitl's API, and only then pays.

Run: python payments.py PORT, with HITL_API_URL and HITL_TOKEN (a redeem token) set.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hitl.receipts import ReceiptError, RemoteKeys, verify

HITL = os.environ["HITL_API_URL"].rstrip("/")
TOKEN = os.environ["HITL_TOKEN"]  # its scope is redeem, its audience "payments"
# Cached 5 minutes. A key id it does not know fetches the keys again.
keys = RemoteKeys(f"{HITL}/.well-known/jwks.json")


def spend(receipt: str) -> bool:
    """Spend the receipt with hitl: True the first time, False ever after."""
    request = urllib.request.Request(
        f"{HITL}/api/v1/receipts/redeem",
        data=json.dumps({"receipt": receipt}).encode(),
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return bool(answer.status == 200)
    except urllib.error.HTTPError:
        return False


class Payments(BaseHTTPRequestHandler):
    """POST /pay with the payment as JSON and its receipt in the Hitl-Receipt header."""

    def do_POST(self) -> None:
        if self.path != "/pay":
            return self.answer(404, {"error": "not_found"})
        size = int(self.headers.get("Content-Length") or 0)
        if not 0 < size <= 65536:
            return self.answer(400, {"error": "bad_size"})
        try:
            args = json.loads(self.rfile.read(size))
        except ValueError:
            return self.answer(400, {"error": "not_json"})
        receipt = self.headers.get("Hitl-Receipt", "")
        try:
            claims = verify(
                receipt, tool="pay", args=args, keys=keys, audience="payments"
            )
        except ReceiptError as refused:  # none, forged, expired, or for another payment
            return self.answer(403, {"error": str(refused.code)})
        if not spend(receipt):
            return self.answer(409, {"error": "already_spent"})
        # Here the payment is made: exactly these arguments, once.
        by = claims["approvers"]
        print(f"paid {args['amount']} to {args['to']}, approved by {by}")
        self.answer(200, {"paid": True, "receipt": claims["jti"]})

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the service prints the payments it makes, not every request."""


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8702
    print(f"payments on http://127.0.0.1:{port}/pay", flush=True)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    ThreadingHTTPServer(("127.0.0.1", port), Payments).serve_forever()
