"""What every agent example shares: a policy, a SQLite store, a refund tool, and a reviewer standing in for Slack.

In production the reviewer is a person clicking a card that `hitl serve` posts from the same store; here a
coroutine makes the same decision through the same service, so the examples run offline.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl import ApprovalService, DecideRequest, DecisionKind, SystemClock, ToolGate, load_config, open_store

POLICY = load_config(Path(__file__).with_name("hitl.yaml"))
"""The examples' hitl.yaml: lookups run, refunds wait for a support reviewer."""


def open_gate(folder: Path) -> ToolGate:
    """The gate an agent process builds: policy + store. No Slack here: `hitl serve` on the store posts cards."""
    store = open_store(f"sqlite:///{folder / 'hitl.db'}")
    return ToolGate(ApprovalService.from_config(POLICY, store=store, clock=SystemClock()))


def refund(order_id: str, amount: float) -> str:
    """Refund an order."""
    print(f"  effect: refunded {amount:g} on order {order_id}")
    return f"refunded {amount:g} on order {order_id}"


async def reviewer_edits_amount(gate: ToolGate, amount: float) -> None:
    """A support reviewer opens Modify on the card and approves a smaller amount."""
    store = gate.service.store
    for _ in range(500):
        pending = (await store.approvals.list_pending()).items
        if pending:
            a = pending[0]
            print(f"  card: {a.tool} {a.args} (asked by {a.asked_by})")
            edited = {**a.args, "amount": amount}
            await gate.service.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args=edited, via="slack"))
            print(f"  reviewer: modified to {edited} and approved")
            return
        await asyncio.sleep(0.01)
    raise SystemExit("no approval was asked for")
