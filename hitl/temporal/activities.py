"""The worker side: hitl's activities (propose; run an approved effect exactly once) and the resumer that delivers
each decision to its waiting workflow as an Update, exactly once.

Register ``HitlActivities(gate, effects).all()`` with your worker, and run an
:class:`~hitl.engine.agents.runs.AgentWatcher` with a :class:`TemporalResumer` beside it: a proposal that needs a person
leaves a durable watch job in the store; once the approval is decided (in Slack, the CLI, the API), the watcher
sends the decision, including after a crash or while no worker was running when it was made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from hitl.engine.agents.gate import ToolCall, ToolGate
from hitl.engine.agents.runs import AgentRuns
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import ClaimRefused, EngineError, NotFound

from .messages import EXECUTE, PROPOSE, REFUSED, UPDATE, Decision, ExecuteInput, Proposal, ProposeInput

__all__ = ["FRAMEWORK", "HitlActivities", "TemporalResumer", "run_identity"]

FRAMEWORK = "temporal"
"""What the approvals this integration asks for record as their framework (the card's "asked by")."""
log = logging.getLogger(__name__)
_STATUS = {
    Status.APPROVED: "approved",
    Status.EXECUTING: "approved",
    Status.EXECUTED: "approved",
    Status.REJECTED: "rejected",
    Status.EXPIRED: "expired",
}


class HitlActivities:
    """``hitl_propose`` and ``hitl_execute`` for a worker; ``effects`` maps tool names to the functions that act."""

    def __init__(self, gate: ToolGate, effects: Mapping[str, Callable[..., Any]]) -> None:
        self.gate = gate
        self.effects = dict(effects)
        self.runs = AgentRuns(gate, FRAMEWORK)

    def all(self) -> list[Callable[..., Any]]:
        """The activities to register with a Temporal worker."""
        return [self.propose, self.execute]

    @activity.defn(name=PROPOSE)
    async def propose(self, req: ProposeInput) -> Proposal:
        """Activity: ask the policy about a call; an approval is created when a person must decide."""
        ticket = await self.gate.check(self._call(req.tool, req.args, req.workflow_id, req.call_id, req))
        if ticket.pending:
            assert ticket.approval is not None
            a = ticket.approval
            # Before the workflow waits: whatever decides it and whenever, the watcher delivers the decision.
            await self.runs.watch(a.id, [a.id])
            return Proposal("pending", {}, "", a.id, a.version, a.action_hash, a.expires_at)
        if not ticket.runs:
            return Proposal("deny", message=ticket.message)
        done = ticket.approval  # an earlier approval of this very call (a replayed proposal), or none needed
        if done is None:
            return Proposal("run", dict(ticket.args))
        return Proposal("run", dict(ticket.args), "", done.id, done.version, done.action_hash)

    @activity.defn(name=EXECUTE)
    async def execute(self, req: ExecuteInput) -> Any:
        """Activity: run the approved (or allowed) call exactly once under its execution claim."""
        fn = self.effects.get(req.tool)
        if fn is None:
            raise EngineError(f"no effect named {req.tool} is registered with HitlActivities")
        if req.approval_id is None:  # allowed without a person: the policy is asked again, here
            ticket = await self.gate.check(self._call(req.tool, req.args, req.workflow_id, req.call_id))
        else:
            ticket = await self.gate.ticket_of(await self.gate.service.store.approvals.get(req.approval_id))
        return await self.gate.execute(ticket, fn, args=req.args)

    def _call(
        self, tool: str, args: dict[str, Any], workflow_id: str, call_id: str, req: ProposeInput | None = None
    ) -> ToolCall:
        return ToolCall(
            tool,
            args,
            session=workflow_id,
            framework=FRAMEWORK,
            call_id=call_id,
            schema=req.args_schema if req else None,
            agent=req.workflow_type if req else None,
            evidence=req.evidence if req else "",
            requester=run_identity(),
        )


def run_identity() -> str:
    """Who asks, from inside one of hitl's activities: the workflow run (namespace, workflow id and run id), read from
    the activity's own context. A new run that reuses a workflow id is another identity: it inherits no trust and
    attaches to no approval of an earlier run."""
    info = activity.info()
    return f"temporal:{info.workflow_namespace}/{info.workflow_id}/{info.workflow_run_id}"


class TemporalResumer:
    """Sends each decided approval to its waiting workflow as the ``hitl_decision`` Update, once (an
    :class:`~hitl.engine.agents.runs.AgentResumer`). A decision the workflow's validator refuses is audited and not sent
    again; one that cannot be sent yet (no worker polls, the server is away) is tried again next round."""

    framework = FRAMEWORK

    def __init__(self, gate: ToolGate, client: Client, *, rpc_timeout: float = 5.0) -> None:
        self.gate = gate
        self.client = client
        self.rpc_timeout = rpc_timeout

    async def continue_run(self, session: str) -> bool:
        """Deliver the decision of the approval a workflow waits on as an Update; True once delivered (or moot)."""
        store, clock = self.gate.service.store, self.gate.service.clock
        try:
            proposed = await store.approvals.get(session)  # the watch is keyed by the approval the workflow waits on
        except NotFound:
            return True
        current = await self.gate.effects.follow(proposed)
        if current.is_open:
            return False
        key = f"temporal:{proposed.id}"
        try:
            claim = await store.ledger.claim(
                key,
                action_hash=proposed.action_hash,
                holder=self.gate.worker_id,
                now=clock.now(),
                lease=60.0,
                retry_failed=True,
            )
        except ClaimRefused:
            return False  # another watcher is sending it right now
        if not claim.acquired:
            return True  # sent already
        ticket = await self.gate.ticket_of(current)
        decision = Decision(
            proposed.id,
            _STATUS.get(current.status, "cancelled") if not ticket.runs else "approved",
            current.version,
            proposed.action_hash,
            dict(ticket.args) if ticket.runs else {},
            current.reason or "",
        )
        handle = self.client.get_workflow_handle(proposed.session_id)
        outcome: dict[str, Any] = {"sent": decision.status}
        try:
            await handle.execute_update(UPDATE, decision, rpc_timeout=timedelta(seconds=self.rpc_timeout))
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if not (isinstance(cause, ApplicationError) and cause.type == REFUSED):
                # Too early (the workflow has not taken its proposal's result yet), or no handler yet: again later.
                failed = {"error": str(cause or exc)[:300]}
                await store.ledger.record_outcome(
                    key, holder=self.gate.worker_id, attempt=claim.attempt, ok=False, result=failed, now=clock.now()
                )
                return False
            outcome = {"refused": str(cause)[:300]}
            await self._refused(proposed.id, current.version, proposed.action_hash, outcome["refused"])
        except (RPCError, WorkflowUpdateRPCTimeoutOrCancelledError) as exc:
            if isinstance(exc, RPCError) and exc.status is RPCStatusCode.NOT_FOUND:
                # The workflow is gone (finished, timed out, terminated): nobody to tell.
                outcome = {"refused": f"workflow {proposed.session_id} is not running"}
                await self._refused(proposed.id, current.version, proposed.action_hash, outcome["refused"])
            else:
                failed = {"error": str(exc)[:300]}
                await store.ledger.record_outcome(
                    key, holder=self.gate.worker_id, attempt=claim.attempt, ok=False, result=failed, now=clock.now()
                )
                return False  # not delivered yet (no worker polls, the server away): the next round tries again
        await store.ledger.record_outcome(
            key, holder=self.gate.worker_id, attempt=claim.attempt, ok=True, result=outcome, now=clock.now()
        )
        return True

    async def _refused(self, approval_id: str, version: int, digest: str, why: str) -> None:
        await self.gate.service.store.audit.append(
            AuditEntry(
                at=self.gate.service.clock.now(),
                actor=self.gate.worker_id,
                event="refused",
                approval_id=approval_id,
                version=version,
                action_hash=digest,
                outcome="update_rejected",
                detail=f"the workflow refused the decision: {why}"[:500],
            )
        )
