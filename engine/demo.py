"""`make demo` for the approval core: the policy, an approval, refusals, a decision and the audit trail.

Runs on the embedded SQLite store in ``.hitl/``; no server, no Slack, no network.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from engine.config import parse_config
from engine.domain.models import DecisionKind
from engine.errors import DecisionRefused
from engine.service import ApprovalService
from engine.storage.sqlite import SqliteStore
from engine.testing import FakeClock

CONFIG = """
requester: agent:riley
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
  finance: [U_FIN1, U_FIN2, U_FIN3]
policy:
  allowed_tools: [look_up_order]
  tools:
    refund: {tier: approve, role: support}
    delete_customer: {tier: approve, role: support, trustable: false}
  rules:
    - name: large_refund
      tools: [refund]
      when: "args.amount > 500"
      tier: escalate
      role: finance
      quorum: 2
      reason: "refund over 500 needs two finance approvers"
    - name: split_refunds
      tools: [refund]
      rolling_sum: {subject: "args.customer_id", value: "args.amount", window: 24h, threshold: 120}
      tier: escalate
      role: finance
      quorum: 2
"""


async def main() -> None:
    out = Console()
    db = Path(".hitl/demo-core.db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = SqliteStore(db)
    clock = FakeClock()
    svc = ApprovalService.from_config(parse_config(CONFIG), store=store, clock=clock)

    out.rule("[bold]1. The policy explains itself")
    examples: list[tuple[str, dict[str, Any]]] = [
        ("look_up_order", {"order_id": "78291"}),
        ("refund", {"customer_id": "C1", "amount": 899}),
        ("wire_transfer", {"amount": 10}),
    ]
    for tool, args in examples:
        out.print(escape((await svc.explain(tool, args)).explain()))

    out.rule("[bold]2. Split transactions: three 49.00 refunds for one customer within an hour")
    for i in range(3):
        clock.advance(15 * 60)
        p = await svc.propose("refund", {"customer_id": "C7", "amount": 49.0, "n": i}, session_id="ses_demo")
        assert p.approval is not None
        out.print(
            f"refund #{i + 1}: {p.verdict.tier} -> {p.approval.id} (role {p.approval.required_role}, "
            f"quorum {p.approval.quorum})"
        )

    out.rule("[bold]3. An approval, two refusals, one decision")
    p = await svc.propose(
        "refund",
        {"customer_id": "C1", "order_id": "78291", "amount": 120},
        session_id="ses_demo",
        evidence="Customer wrote from jane@example.com, card 4111 1111 1111 1111: <!channel> refund!",
    )
    a = p.approval
    assert a is not None
    out.print(escape(f"created {a.id}: {a.tool} {a.args}  hash {a.action_hash[:12]}  v{a.version}"))
    out.print(f"evidence as stored (redacted): {escape(repr(a.evidence))}")
    for who in ("U_STRANGER", "agent:riley"):
        try:
            await svc.decide(a.id, who, DecisionKind.APPROVE, via="demo")
        except DecisionRefused as exc:
            out.print(f"[red]refused[/red] {who}: {escape(str(exc))}")
    done = await svc.decide(a.id, "U_SUPPORT1", DecisionKind.APPROVE, via="demo")
    out.print(f"[green]{done.status}[/green] by U_SUPPORT1 at version {done.version}")

    out.rule("[bold]4. Audit trail")
    for e in await store.audit.entries(approval_id=a.id):
        out.print(escape(f"{e.seq:>3}  {e.event:<9} {e.actor:<12} v{e.version}  {e.outcome:<14} {e.detail}"))
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
