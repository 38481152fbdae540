"""The agent: asks to pay a supplier, and waits for a person to approve it.
Approved, it pays through the payment service, with the receipt `hitl serve` signed.

Run it beside `hitl demo` and payments.py, as the Receipts page shows.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request

from hitl import Approvals, ApprovalService, SystemClock, load_config, open_store

PAYMENTS = os.environ.get("PAYMENTS_URL", "http://127.0.0.1:8702")


def pay(args: dict[str, object], receipt: str) -> str:
    """Call the payment service with the receipt: what it answered."""
    request = urllib.request.Request(
        f"{PAYMENTS}/pay",
        data=json.dumps(args).encode(),
        headers={"Content-Type": "application/json", "Hitl-Receipt": receipt},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
            return str(answer.read().decode())
    except urllib.error.HTTPError as refused:
        return f"refused ({refused.code}): {refused.read().decode()}"


async def main() -> int:
    # HITL_STORE: the store `hitl demo --store` keeps. HITL_API_URL: hitl serve.
    config = load_config("hitl.yaml")
    store = open_store(os.environ.get("HITL_STORE"))
    service = ApprovalService.from_config(config, store=store, clock=SystemClock())
    try:
        print("asking to pay 120.00 to V-1042: approve it in the sandbox", flush=True)
        answer = await Approvals(service, wait=3600).ask(
            "pay", {"to": "V-1042", "amount": 120}, session="loop-1"
        )
        if not answer.approved or answer.receipt is None:
            print(f"not paid: {answer.status} {answer.reason or ''}")
            return 3
        # The approved arguments (a reviewer may have changed them), with their receipt.
        print("the payment service says:", pay(answer.args, answer.receipt))
        # Sent again, the receipt is refused: it was spent.
        print("and to the same receipt again:", pay(answer.args, answer.receipt))
        return 0
    finally:
        await store.close()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
