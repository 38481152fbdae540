"""A review gate: a person approves, rejects, gives feedback (re-run the previous step) or lets it expire."""

from __future__ import annotations

from hitl.engine.domain.models import ApprovalKind, DecisionKind, Status
from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.runner.outcomes import Redo, Stop, goes_on, stop_for
from hitl.engine.runner.step_context import StepContext
from hitl.engine.runner.templates import evaluate, render_value
from hitl.engine.workflow.definition import GateStep, LoadedWorkflow, Step

__all__ = ["GateHandler"]


class GateHandler:
    """Runs a ``gate`` step: a person reviews what came before, and approves, or gives feedback that redoes a step."""

    def __init__(self, context: StepContext) -> None:
        self.context = context

    async def run(self, wf: LoadedWorkflow, state: RunState, step: GateStep, before: Step | None) -> Stop | Redo | None:
        """Ask (or read the answer); ``before`` is the step whose work the gate reviews (feedback re-runs it)."""
        scope = self.context.scope(state, step.id)
        if step.condition and not evaluate(step.condition, scope, where=f"steps.{step.id}.condition"):
            state.outputs[step.id] = {"skipped": True}
            return None
        prompt = str(render_value(step.prompt, scope, where=f"steps.{step.id}.prompt"))
        preview = str(render_value(step.preview, scope, where=f"steps.{step.id}.preview"))[: step.preview_length]
        it = state.iteration.get(step.id, 0)
        a = await self.context.review(
            state,
            f"gate:{step.id}",
            step.id,
            prompt,
            preview,
            kind=ApprovalKind.GATE,
            role=step.role,
            timeout=step.timeout,
            fallback=step.fallback,
        )
        if goes_on(a):
            state.outputs[step.id] = {"approved_by": list(a.approvers)}
            return None
        if a.status is Status.EXPIRED and step.fallback == "continue":
            state.outputs[step.id] = {"expired": True}
            state.history.append(f"{step.id}: expired; fallback continue")
            return None
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            if before is None:
                return Stop(RunStatus.REJECTED, approval=a, reason="feedback given, but no earlier step to re-run")
            target = before
            state.feedback[target.id] = a.reason or ""
            state.iteration[target.id] = state.iteration.get(target.id, 0) + 1
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: feedback from {a.decisions[-1].reviewer}; re-running {target.id}")
            return Redo(target.id)
        return stop_for(a) or Stop(RunStatus.REJECTED, approval=a, reason=a.reason)
