"""A quality loop: repeat a tool step until a condition holds; after N iterations a reviewer looks."""

from __future__ import annotations

import json

from hitl.engine.domain.models import ApprovalKind, DecisionKind, Status
from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.outcomes import Stop, goes_on, stop_for
from hitl.engine.runner.step_context import StepContext
from hitl.engine.runner.templates import evaluate
from hitl.engine.workflow.definition import LoadedWorkflow, ToolStep

__all__ = ["LoopHandler"]


class LoopHandler:
    """Runs a step with a ``loop``: its tool over each item, each call gated and run once."""

    def __init__(self, context: StepContext) -> None:
        self.context = context

    async def run(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Stop | None:
        spec = step.repeat
        assert spec is not None
        context = self.context
        while True:
            it = state.iteration.get(step.id, 0)
            due = spec.review_after and it and (it % spec.review_after == 0 or it >= spec.max)
            if due and state.iteration.get(f"{step.id}@reviewed") != it:
                verdict = await self._review(state, step, it)
                if verdict is not None:
                    return verdict if isinstance(verdict, Stop) else None  # True: accepted as it is
                state.iteration[f"{step.id}@reviewed"] = it
            args = context.args(tool, state, step)
            out = await context.gated(tool, state, step, args, key=f"{state.session_id}:{step.id}:{it}")
            if isinstance(out, Stop):
                return out
            state.outputs[step.id] = out
            if evaluate(spec.until, context.scope(state, step.id), where=f"steps.{step.id}.repeat.until"):
                return None
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: iteration {it + 1} did not meet '{spec.until}'")
            await context.save(state)
            if it + 1 >= spec.max and not spec.review_after:
                return Stop(RunStatus.FAILED, reason=f"{step.id} did not meet '{spec.until}' in {spec.max} iterations")

    async def _review(self, state: RunState, step: ToolStep, it: int) -> Stop | bool | None:
        """A reviewer looks: approve the current output, continue, give feedback, or reject."""
        preview = json.dumps(state.outputs.get(step.id), ensure_ascii=False, default=str)[:1500]
        a = await self.context.review(
            state,
            f"review:{step.id}",
            step.id,
            "Accept the current output?",
            preview,
            kind=ApprovalKind.REVIEW,
            role=None,
            timeout=step.timeout,
            fallback="cancel",
        )
        if goes_on(a):
            return True
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            state.feedback[step.id] = a.reason or ""
            return None
        return stop_for(a) or Stop(RunStatus.REJECTED, approval=a, reason=a.reason)
