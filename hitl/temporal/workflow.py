"""The workflow side: ask for approval from inside a Temporal workflow, and run the approved effect as an activity.

Inside a workflow definition::

    decision = await require_approval("refund", {"order_id": "78291", "amount": 120}, evidence=note)
    if decision.approved:
        result = await run_approved("refund", decision)

The proposal is an activity (the policy decides there; an approval is created and ``hitl serve`` posts its card).
The workflow then waits durably for an Update named ``hitl_decision`` whose validator refuses anything but a
decision on exactly this approval (id, action hash, a version past the one proposed), so a stale or foreign
decision never lands in history. A timer bounds the wait at the approval's expiry. This module imports only
Temporal's workflow API and plain dataclasses: it is safe in the workflow sandbox.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from .messages import EXECUTE, NOT_READY, PROPOSE, REFUSED, UPDATE, Decision, ExecuteInput, Proposal, ProposeInput

__all__ = ["require_approval", "run_approved"]


async def require_approval(
    tool: str,
    args: dict[str, Any],
    *,
    evidence: str = "",
    args_schema: dict[str, Any] | None = None,
    activity_timeout: timedelta = timedelta(seconds=30),
) -> Decision:
    """The decision on ``tool(args)``: at once when the policy allows or denies it, else once a reviewer decides
    (or ``expired`` when the approval's deadline passes first). One approval at a time per workflow."""
    info = workflow.info()
    call_id = str(workflow.uuid4())  # the same on every replay: a retried proposal re-attaches, never duplicates
    proposed: list[Proposal] = []
    received: list[Decision] = []

    def validate(d: Decision) -> None:
        if not proposed:
            # Registered before the proposal returns, so a decision arriving in the same activation as the
            # proposal's result is answered "not yet" (the sender tries again), never "no such handler".
            raise ApplicationError("the proposal has not reached the workflow yet", type=NOT_READY)
        p = proposed[0]
        if received:
            raise ApplicationError(f"{p.approval_id} was already decided", type=REFUSED)
        if d.approval_id != p.approval_id or d.action_hash != p.action_hash:
            raise ApplicationError(f"this decision is not on {p.approval_id} as it was proposed", type=REFUSED)
        if d.version <= p.version:
            raise ApplicationError(f"stale: version {d.version}, proposed at {p.version}", type=REFUSED)

    def accept(d: Decision) -> None:  # typed: the payload is converted to the handler's parameter type
        received.append(d)

    workflow.set_update_handler(UPDATE, accept, validator=validate)
    proposal = await workflow.execute_activity(
        PROPOSE,
        ProposeInput(tool, args, info.workflow_id, call_id, evidence, info.workflow_type, args_schema),
        start_to_close_timeout=activity_timeout,
        result_type=Proposal,
    )
    proposed.append(proposal)
    if proposal.verdict == "run":
        return Decision(proposal.approval_id, "approved", proposal.version, proposal.action_hash, proposal.args)
    if proposal.verdict == "deny" or proposal.approval_id is None:
        return Decision(proposal.approval_id, "denied", reason=proposal.message)
    left = proposal.expires_at - workflow.now().timestamp()
    try:
        await workflow.wait_condition(lambda: bool(received), timeout=max(left, 0.001))
    except TimeoutError:
        return Decision(proposal.approval_id, "expired", proposal.version, proposal.action_hash, reason="expired")
    return received[0]


async def run_approved(
    tool: str, decision: Decision, *, activity_timeout: timedelta = timedelta(minutes=5), retries: int = 3
) -> Any:
    """Run the approved effect as an activity, exactly once under the approval's idempotency key (a retried
    activity gets the recorded result back instead of running it again)."""
    if not decision.approved:
        raise ValueError(f"{tool} was not approved ({decision.status}): nothing to run")
    info = workflow.info()
    return await workflow.execute_activity(
        EXECUTE,
        ExecuteInput(tool, decision.args, decision.approval_id, info.workflow_id, str(workflow.uuid4())),
        start_to_close_timeout=activity_timeout,
        retry_policy=RetryPolicy(maximum_attempts=retries),
    )
