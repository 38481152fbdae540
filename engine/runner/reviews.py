"""Review gates and quality loops: a person looks, then the run goes on, re-runs a step, or stops."""

from __future__ import annotations

import json

from engine.domain.hashing import action_hash
from engine.domain.models import Approval, DecisionKind, Status, Tier
from engine.errors import EngineError, ErrorCode
from engine.runner.base import RunnerBase
from engine.runner.outcomes import Halt, Jump, halt_for, previous_tool_step
from engine.runner.spec import GateStep, LoadedWorkflow, ToolStep
from engine.runner.state import RunState, RunStatus
from engine.runner.templates import evaluate, render_value
from engine.runner.tools import Tool

__all__ = ["ReviewSteps"]


class ReviewSteps(RunnerBase):
    async def _loop(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Halt | None:
        spec = step.repeat
        assert spec is not None
        while True:
            it = state.iteration.get(step.id, 0)
            due = spec.review_after and it and (it % spec.review_after == 0 or it >= spec.max)
            if due and state.iteration.get(f"{step.id}@reviewed") != it:
                verdict = await self._review(wf, state, step, it)
                if verdict is not None:
                    return verdict if isinstance(verdict, Halt) else None
                state.iteration[f"{step.id}@reviewed"] = it
            out = await self._gated(
                wf, tool, state, step, self._args(tool, state, step), key=f"{state.session_id}:{step.id}:{it}"
            )
            if isinstance(out, Halt):
                return out
            state.outputs[step.id] = out
            if evaluate(spec.until, self._scope(state, step.id), where=f"steps.{step.id}.repeat.until"):
                return None
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: iteration {it + 1} did not meet '{spec.until}'")
            await self._save(state)
            if it + 1 >= spec.max and not spec.review_after:
                return Halt(RunStatus.FAILED, reason=f"{step.id} did not meet '{spec.until}' in {spec.max} iterations")

    async def _review(self, wf: LoadedWorkflow, state: RunState, step: ToolStep, it: int) -> Halt | Jump | None:
        """A reviewer looks at a quality loop: approve the current output, continue, feedback, or reject."""
        preview = json.dumps(state.outputs.get(step.id), ensure_ascii=False, default=str)[:1500]
        a = await self._gate_approval(
            state,
            f"review:{step.id}",
            step.id,
            it,
            "Accept the current output?",
            preview,
            role=None,
            timeout=step.timeout,
            fallback="cancel",
        )
        if a.status is Status.APPROVED:
            return Jump(state.position + 1)
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            state.feedback[step.id] = a.reason or ""
            return None
        return halt_for(a) or Halt(RunStatus.REJECTED, approval=a, reason=a.reason)

    # -- review gates -----------------------------------------------------------------------------------
    async def _gate(self, wf: LoadedWorkflow, state: RunState, step: GateStep) -> Halt | Jump | None:
        scope = self._scope(state, step.id)
        if step.condition and not evaluate(step.condition, scope, where=f"steps.{step.id}.condition"):
            state.outputs[step.id] = {"skipped": True}
            return None
        prompt = str(render_value(step.prompt, scope, where=f"steps.{step.id}.prompt"))
        preview = str(render_value(step.preview, scope, where=f"steps.{step.id}.preview"))[: step.preview_length]
        it = state.iteration.get(step.id, 0)
        a = await self._gate_approval(
            state,
            f"gate:{step.id}",
            step.id,
            it,
            prompt,
            preview,
            role=step.role,
            timeout=step.timeout,
            fallback=step.fallback,
        )
        if a.status is Status.APPROVED:
            state.outputs[step.id] = {"approved_by": list(a.approvers)}
            return None
        if a.status is Status.EXPIRED and step.fallback == "continue":
            state.outputs[step.id] = {"expired": True}
            state.history.append(f"{step.id}: expired; fallback continue")
            return None
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            prev = previous_tool_step(wf, state.position)
            if prev is None:
                return Halt(RunStatus.REJECTED, approval=a, reason="feedback given, but no earlier step to re-run")
            target = wf.spec.steps[prev]
            state.feedback[target.id] = a.reason or ""
            state.iteration[target.id] = state.iteration.get(target.id, 0) + 1
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: feedback from {a.decisions[-1].reviewer}; re-running {target.id}")
            return Jump(prev)
        return halt_for(a) or Halt(RunStatus.REJECTED, approval=a, reason=a.reason)

    async def _gate_approval(
        self,
        state: RunState,
        tool: str,
        step_id: str,
        it: int,
        prompt: str,
        preview: str,
        *,
        role: str | None,
        timeout: float | None,
        fallback: str,
    ) -> Approval:
        args = {"prompt": prompt, "preview": preview}
        prop = await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            preview=preview,
            min_tier=Tier.APPROVE,
            dedupe_key=f"{state.session_id}:{tool}:{it}:{action_hash(tool, args)}",
            metadata={"step": step_id, "workflow": state.workflow, "kind": "gate", "fallback": fallback},
            timeout=timeout,
            role=role,
        )
        if prop.approval is None:
            raise EngineError(
                f"{tool}: the policy denies review gates here; allow it or remove the gate",
                code=ErrorCode.POLICY_DENIED,
            )
        return prop.approval
