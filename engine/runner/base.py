"""The runner's common steps: template scope, arguments, proposals, gated effects, checkpoints."""

from __future__ import annotations

import json
import socket
from typing import Any

from engine.domain.hashing import action_hash, batch_hash
from engine.domain.ids import short_id
from engine.domain.models import Approval, Tier
from engine.runner.effects import Effects
from engine.runner.outcomes import Halt, RunResult, halt_for
from engine.runner.spec import LoadedWorkflow, ToolStep
from engine.runner.state import RunState, RunStatus
from engine.runner.templates import render_value
from engine.runner.tools import Tool, load_tools
from engine.service import ApprovalService, Proposal

__all__ = ["RunnerBase"]


class RunnerBase:
    """State and helpers shared by the runner's step kinds."""

    def __init__(self, service: ApprovalService, *, worker_id: str | None = None, lease: float = 300.0) -> None:
        self.svc = service
        self.store = service.store
        self.worker_id = worker_id or f"runner:{socket.gethostname()}:{short_id('w')}"
        self.effects = Effects(service.store, service.clock, self.worker_id, lease)
        self._tools: dict[str, dict[str, Tool]] = {}
        self._checked: set[str] = set()

    def _scope(self, state: RunState, step_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "vars": state.vars,
            "steps": {k: {"output": v} for k, v in state.outputs.items()},
            "feedback": state.feedback.get(step_id, ""),
            "iteration": state.iteration.get(step_id, 0),
            **extra,
        }

    def _args(self, tool: Tool, state: RunState, step: ToolStep, **extra: Any) -> dict[str, Any]:
        rendered = render_value(step.args, self._scope(state, step.id, **extra), where=f"steps.{step.id}.args")
        return tool.schema.validate(rendered)

    async def _propose(
        self, wf: LoadedWorkflow, state: RunState, step: ToolStep, tool: str, args: dict[str, Any], **kw: Any
    ) -> Any:
        it = state.iteration.get(step.id, 0)
        digest = (
            batch_hash([(tool, a) for a in kw["batch"]]) if kw.get("batch") is not None else action_hash(tool, args)
        )
        evidence = str(render_value(step.evidence, self._scope(state, step.id), where=f"steps.{step.id}.evidence"))
        return await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            evidence=evidence,
            preview=json.dumps(args, ensure_ascii=False, indent=1)[:2000] if not kw.get("batch") else "",
            min_tier=Tier.APPROVE if step.approval == "required" else Tier.AUTO,
            dedupe_key=f"{state.session_id}:{step.id}:{it}:{digest}",
            metadata={"step": step.id, "workflow": wf.spec.name, "kind": "tool"},
            timeout=step.timeout,
            **kw,
        )

    async def _gated(
        self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep, args: dict[str, Any], *, key: str
    ) -> Any:
        verdict = await self._standing(tool.name, await self._propose(wf, state, step, tool.name, args))
        if isinstance(verdict, Halt):
            return verdict
        return await self.effects.execute(tool, verdict.execute_args if verdict else args, key=key, approval=verdict)

    async def _standing(self, tool: str, prop: Proposal) -> Approval | Halt | None:
        """What a proposal means for the run: halt (denied, pending, rejected...), go with an approval, or go."""
        if prop.verdict.denied:
            return Halt(RunStatus.REJECTED, reason=f"{tool} is denied by policy; nothing ran")
        if prop.approval is None:
            return None
        approval = await self.effects.follow(prop.approval)
        return halt_for(approval) or approval

    # -- persistence ------------------------------------------------------------------------------------
    async def _save(self, state: RunState) -> None:
        data = state.model_dump(mode="json", exclude={"version"})
        state.version = await self.store.runs.save(
            state.session_id, data, expected_version=state.version, now=self.svc.clock.now()
        )

    def _load(self, wf: LoadedWorkflow) -> dict[str, Tool]:
        key = wf.spec_hash
        if key not in self._tools:
            self._tools[key] = load_tools(wf.spec.tools, base=wf.path.parent)
        return self._tools[key]

    def _result(self, state: RunState, approval: Approval | None = None) -> RunResult:
        return RunResult(
            status=state.status,
            session_id=state.session_id,
            approval=approval,
            reason=state.reason,
            outputs=dict(state.outputs),
            history=tuple(state.history),
        )
