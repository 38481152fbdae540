"""A plain tool step: propose, wait for a human when the policy says so, run the effect once."""

from __future__ import annotations

from hitl.engine.domain.runs import RunState
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.outcomes import Stop
from hitl.engine.runner.step_context import StepContext
from hitl.engine.workflow.definition import LoadedWorkflow, ToolStep

__all__ = ["ToolHandler"]


class ToolHandler:
    """Runs a ``tool`` step: the call is proposed, approved when the policy asks for it, and executed once."""

    def __init__(self, context: StepContext) -> None:
        self.context = context

    async def run(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Stop | None:
        it = state.iteration.get(step.id, 0)
        args = self.context.args(tool, state, step)
        out = await self.context.gated(tool, state, step, args, key=f"{state.session_id}:{step.id}:{it}")
        if isinstance(out, Stop):
            return out
        state.outputs[step.id] = out
        return None
