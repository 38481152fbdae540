"""Approvals inside Temporal workflows, against the Temporal dev server: approve, reject, modify, a stale Update
refused by the validator, a worker restart while waiting, and a decision made while no worker runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.testing.conformance.adapters import PRACTICE_CONFIG
from hitl.temporal import Decision
from tests.temporal.conftest import CONFIG, Stand
from tests.temporal.workflows import RefundWorkflow
from tests.waiting import eventually


async def test_an_approved_refund_runs_once_with_the_approvals_key(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
        assert approval.session_id == handle.id and approval.metadata["framework"] == "temporal"
        assert stand.refunds == []
        await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        assert await stand.deliver() == 1
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
        assert await stand.deliver(rounds=2) == 0  # delivered once
    assert stand.refunds == [("78291", 120, f"call:{approval.id}")]
    assert (await stand.store.approvals.get(approval.id)).status is Status.EXECUTED


async def test_a_rejection_reaches_the_workflow_with_its_reason(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
        await stand.service.decide(
            DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.REJECT, reason="not eligible", via="api")
        )
        await stand.deliver()
        assert await asyncio.wait_for(handle.result(), 30) == "not refunded (rejected): not eligible"
    assert stand.refunds == []


async def test_a_modified_refund_runs_with_the_validated_edit(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
        await stand.service.decide(
            DecideRequest(
                approval.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"order_id": "78291", "amount": 60}, via="slack"
            )
        )
        await stand.deliver()
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 60 on order 78291"
    assert [(o, a) for o, a, _ in stand.refunds] == [("78291", 60)]


async def test_a_stale_or_foreign_update_is_refused_before_it_lands(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        early = Decision("apr_any", "approved", 2, "0" * 64, {})
        with pytest.raises(WorkflowUpdateFailedError) as too_early:  # before the proposal reached the workflow
            await handle.execute_update("hitl_decision", early)
        # "not ready" or "no handler yet": answers the resumer meets with sending again, never with giving up
        assert isinstance(too_early.value.cause, ApplicationError) and too_early.value.cause.type != "HitlRefused"
        approval = await stand.pending()
        stale = Decision(approval.id, "approved", approval.version, approval.action_hash, {"amount": 1})
        assert await refusal(handle, stale) == "HitlRefused"  # the version it was proposed at: not a decision
        foreign = Decision("apr_other", "approved", approval.version + 1, approval.action_hash, {})
        assert await refusal(handle, foreign) == "HitlRefused"
        assert stand.refunds == []
        history = [EventType.Name(e.event_type) for e in (await handle.fetch_history()).events]
        assert "EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED" not in history  # refused: never in history
        await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        await stand.deliver()
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
        history = [EventType.Name(e.event_type) for e in (await handle.fetch_history()).events]
        assert history.count("EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED") == 1  # the real decision, once


async def test_a_worker_restart_while_waiting_loses_nothing(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
    async with stand.worker():  # a new worker; the workflow's wait is in Temporal's history
        await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        await stand.deliver()
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
    assert len(stand.refunds) == 1


async def test_a_decision_made_while_no_worker_runs_is_delivered_when_one_does(stand: Stand) -> None:
    async with stand.worker():
        handle = await stand.start()
        approval = await stand.pending()
    await stand.service.decide(DecideRequest(approval.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
    assert await stand.deliver(rounds=2) == 0  # nothing polls the workflow's queue: not delivered, kept for later
    assert stand.refunds == []
    async with stand.worker():
        assert await stand.deliver() == 1
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
    assert len(stand.refunds) == 1


async def refusal(handle: WorkflowHandle[Any, Any], decision: Decision) -> str:
    """The validator's error type for ``decision``, once the workflow has taken its proposal (until then it says
    "not ready", which the resumer answers by sending again)."""

    async def refused_as() -> str | None:
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("hitl_decision", decision)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError)
        return None if cause.type == "HitlNotReady" else str(cause.type)

    return await eventually(refused_as, what="the workflow to take its proposal")


async def test_a_halt_denies_the_workflows_call_and_nothing_runs(stand: Stand) -> None:
    """The stop switch reaches a Temporal workflow's proposal: it is told who halted it and why, and nothing runs."""
    await stand.service.switch.halt("refund", by="U_ADMIN", reason="incident 11")
    async with stand.worker():
        handle = await stand.start()
        result = await asyncio.wait_for(handle.result(), 30)
    assert "incident 11" in result and result.startswith("not refunded")
    assert stand.refunds == [] and (await stand.store.approvals.list_pending()).items == []


async def test_a_practice_twin_is_never_delivered_to_the_workflow(stand: Stand) -> None:
    """Practice approvals under Temporal: the workflow's approval gets a practice twin; approving the twin delivers
    nothing and runs nothing; the workflow goes on with its own approval, once."""
    stand.service.practice = parse_config(CONFIG + PRACTICE_CONFIG).oversight.practice
    async with stand.worker():
        handle = await stand.start()

        async def both() -> list[Any] | None:
            items = (await stand.store.approvals.list_pending()).items
            return items if len(items) == 2 else None

        items = await eventually(both, what="the workflow's approval and its practice twin")
        [real] = [a for a in items if "of" not in a.metadata]
        [twin] = [a for a in items if a.metadata.get("of") == real.id]
        await stand.service.decide(DecideRequest(twin.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        assert await stand.deliver() == 0 and stand.refunds == []
        await stand.service.decide(DecideRequest(real.id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
        assert await stand.deliver() == 1
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
    assert stand.refunds == [("78291", 120, f"call:{real.id}")]


async def test_a_trust_covers_its_run_and_a_new_run_of_the_same_workflow_id_inherits_nothing(stand: Stand) -> None:
    """Inside Temporal, who asks is the workflow run (namespace, workflow id, run id): a Trust given to one run never
    lets a later run that reuses the workflow id through, nor does that run attach to the earlier run's approval."""
    async with stand.worker():
        handle = await stand.start()
        first = await stand.pending()
        assert first.requester == f"temporal:default/{handle.id}/{handle.first_execution_run_id}"
        await stand.service.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.TRUST, via="slack"))
        await stand.deliver()
        assert await asyncio.wait_for(handle.result(), 30) == "done: refunded 120 on order 78291"
        again = await stand.client.start_workflow(
            RefundWorkflow.run, args=["78291", 120], id=handle.id, task_queue=stand.queue
        )
        second = await stand.pending()  # the same call, the same workflow id: asked about again
        assert second.id != first.id and second.session_id == handle.id
        assert second.requester == f"temporal:default/{handle.id}/{again.first_execution_run_id}"
        await stand.service.decide(DecideRequest(second.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no", via="api"))
        await stand.deliver()
        assert await asyncio.wait_for(again.result(), 30) == "not refunded (rejected): no"
    assert [(o, a) for o, a, _ in stand.refunds] == [("78291", 120)]
