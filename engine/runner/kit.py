"""What every step handler shares: the run's services, template scope, proposals, gated effects, checkpoints."""

from __future__ import annotations

import json
import socket
from typing import Any

from engine.domain.hashing import action_hash, batch_hash
from engine.domain.ids import short_id
from engine.domain.models import Approval, Tier
from engine.errors import EngineError, ErrorCode
from engine.runner.effects import Effects
from engine.runner.outcomes import Halt, halt_for
from engine.runner.spec import LoadedWorkflow, ToolStep
from engine.runner.state import RunState, RunStatus
from engine.runner.templates import render_value
from engine.runner.tools import Tool
from engine.service import ApprovalService, Proposal

__all__ = ["StepKit"]


class StepKit:
    """The toolkit a step handler works with. One per runner; holds no run state of its own.

    Args:
        service: policy + store + reviewers of the run's world.
        worker_id: names this process in execution claims and the audit log.
        lease: seconds an execution claim stays valid without an outcome (recovery takes over after).
    """

    def __init__(self, service: ApprovalService, *, worker_id: str | None = None, lease: float = 300.0) -> None:
        self.svc = service
        self.store = service.store
        self.worker_id = worker_id or f"runner:{socket.gethostname()}:{short_id('w')}"
        self.effects = Effects(service.store, service.clock, self.worker_id, lease)

    # -- templates ----------------------------------------------------------------------------------------
    def scope(self, state: RunState, step_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "vars": state.vars,
            "steps": {k: {"output": v} for k, v in state.outputs.items()},
            "feedback": state.feedback.get(step_id, ""),
            "iteration": state.iteration.get(step_id, 0),
            **extra,
        }

    def args(self, tool: Tool, state: RunState, step: ToolStep, **extra: Any) -> dict[str, Any]:
        rendered = render_value(step.args, self.scope(state, step.id, **extra), where=f"steps.{step.id}.args")
        return tool.schema.validate(rendered)

    # -- approvals ----------------------------------------------------------------------------------------
    async def waiting(self, state: RunState, *, step_id: str, tool: str) -> Approval | None:
        """The approval the checkpoint says this step waits on, if any (followed through modifications).

        A resumed step reads its approval from the checkpoint instead of proposing again, so a resume never
        re-evaluates the policy or re-counts rolling windows. It is consumed here: a later iteration of the same
        step proposes its own approval.
        """
        if state.waiting is None:
            return None
        found = await self.store.approvals.get(state.waiting)
        it = state.iteration.get(step_id, 0)
        if found.metadata.get("step") != step_id or found.tool != tool or found.metadata.get("iteration", it) != it:
            return None
        state.waiting = None
        return await self.effects.follow(found)

    async def propose(
        self, wf: LoadedWorkflow, state: RunState, step: ToolStep, tool: str, args: dict[str, Any], **kw: Any
    ) -> Proposal:
        it = state.iteration.get(step.id, 0)
        digest = (
            batch_hash([(tool, a) for a in kw["batch"]]) if kw.get("batch") is not None else action_hash(tool, args)
        )
        evidence = str(render_value(step.evidence, self.scope(state, step.id), where=f"steps.{step.id}.evidence"))
        return await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            evidence=evidence,
            preview=json.dumps(args, ensure_ascii=False, indent=1)[:2000] if not kw.get("batch") else "",
            min_tier=Tier.APPROVE if step.approval == "required" else Tier.AUTO,
            dedupe_key=f"{state.session_id}:{step.id}:{it}:{digest}",
            metadata={"step": step.id, "iteration": it, "workflow": wf.spec.name, "kind": "tool"},
            timeout=step.timeout,
            **kw,
        )

    async def standing(
        self, wf: LoadedWorkflow, state: RunState, step: ToolStep, tool: str, args: dict[str, Any], **kw: Any
    ) -> Approval | Halt | None:
        """What the step may do now: halt (denied, pending, rejected...), go with an approval, or go."""
        waited = await self.waiting(state, step_id=step.id, tool=tool)
        if waited is not None:
            return halt_for(waited) or waited
        prop = await self.propose(wf, state, step, tool, args, **kw)
        if prop.verdict.denied:
            return Halt(RunStatus.REJECTED, reason=f"{tool} is denied by policy; nothing ran")
        if prop.approval is None:
            return None
        approval = await self.effects.follow(prop.approval)
        return halt_for(approval) or approval

    async def gated(
        self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep, args: dict[str, Any], *, key: str
    ) -> Any:
        """Run ``tool`` once it may run (with the approved, possibly modified, arguments), or halt."""
        verdict = await self.standing(wf, state, step, tool.name, args)
        if isinstance(verdict, Halt):
            return verdict
        return await self.effects.execute(tool, verdict.execute_args if verdict else args, key=key, approval=verdict)

    async def review(
        self,
        state: RunState,
        tool: str,
        step_id: str,
        prompt: str,
        preview: str,
        *,
        role: str | None,
        timeout: float | None,
        fallback: str,
    ) -> Approval:
        """The approval of a review (a gate, or a quality loop's check): from the checkpoint, or proposed now."""
        waited = await self.waiting(state, step_id=step_id, tool=tool)
        if waited is not None:
            return waited
        it = state.iteration.get(step_id, 0)
        args = {"prompt": prompt, "preview": preview}
        prop = await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            preview=preview,
            min_tier=Tier.APPROVE,
            dedupe_key=f"{state.session_id}:{tool}:{it}:{action_hash(tool, args)}",
            metadata={
                "step": step_id,
                "iteration": it,
                "workflow": state.workflow,
                "kind": "gate",
                "fallback": fallback,
            },
            timeout=timeout,
            role=role,
        )
        if prop.approval is None:
            raise EngineError(
                f"{tool}: the policy denies review gates here; allow it or remove the gate",
                code=ErrorCode.POLICY_DENIED,
            )
        return prop.approval

    # -- persistence --------------------------------------------------------------------------------------
    async def save(self, state: RunState) -> None:
        data = state.model_dump(mode="json", exclude={"version"})
        state.version = await self.store.runs.save(
            state.session_id, data, expected_version=state.version, now=self.svc.clock.now()
        )
