"""A batch: one approval bound to the exact ordered items, then one effect per item under its own key."""

from __future__ import annotations

from hitl.engine.domain.models import Status
from hitl.engine.domain.runs import RunState
from hitl.engine.errors import InvalidInput
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.outcomes import Stop
from hitl.engine.runner.step_context import StepContext
from hitl.engine.runner.templates import evaluate
from hitl.engine.workflow.definition import LoadedWorkflow, ToolStep

__all__ = ["BatchHandler"]


class BatchHandler:
    """Runs a ``batch`` step: every item of a batch under one approval bound to the exact ordered items."""

    def __init__(self, context: StepContext) -> None:
        self.context = context

    async def run(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Stop | None:
        assert step.for_each is not None
        items = evaluate(step.for_each, self.context.scope(state, step.id), where=f"steps.{step.id}.for_each")
        if not isinstance(items, list | tuple):
            raise InvalidInput(f"steps.{step.id}.for_each must give a list, got {type(items).__name__}")
        all_args = [self.context.args(tool, state, step, **{step.as_: item}) for item in items]
        approval = await self.context.standing(state, self.context.ask_for(state, step), tool.name, {}, batch=all_args)
        if isinstance(approval, Stop):
            return approval
        effects = self.context.effects
        if approval is not None:
            # Kept: marking executed later starts from this (a stale copy still `approved` would never get there).
            approval = await effects.mark(approval, Status.EXECUTING)
        it = state.iteration.get(step.id, 0)
        outputs = []
        for idx, args in enumerate(all_args):
            key = f"{state.session_id}:{step.id}:{it}:{idx}"
            item_of = (approval, idx) if approval is not None else None
            out = await self.context.effect(state, step.id, tool, args, key=key, approval=None, item_of=item_of)
            if isinstance(out, Stop):
                return out
            outputs.append(out)
            state.history.append(f"{step.id}: item {idx + 1}/{len(all_args)} done")
        if approval is not None:
            # The last item's outcome waits for the run's next commit: write it first, so the batch's approval is
            # never recorded as executed before every item it covers is.
            await self.context.flush(state)
            await effects.mark(approval, Status.EXECUTED)
        state.outputs[step.id] = outputs
        return None
