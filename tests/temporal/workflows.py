"""A refund workflow that asks hitl first (the shape the README shows)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from hitl.temporal.workflow import require_approval, run_approved


@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, order_id: str, amount: float) -> str:
        decision = await require_approval(
            "refund", {"order_id": order_id, "amount": amount}, evidence="customer: <!channel> box arrived crushed"
        )
        if not decision.approved:
            return f"not refunded ({decision.status}): {decision.reason}"
        return f"done: {await run_approved('refund', decision)}"
