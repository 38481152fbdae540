"""A plain tool step: propose, wait for a human when the policy says so, run the effect once."""

from __future__ import annotations

from hitl.engine.domain.runs import RunState
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.outcomes import Halt
from hitl.engine.runner.step_context import StepContext
from hitl.engine.workflow.definition import LoadedWorkflow, ToolStep

__all__ = ["ToolHandler"]


class ToolHandler:
    """Runs a ``tool`` step: the call is proposed, approved when the policy asks for it, and executed once."""

    def __init__(self, kit: StepContext) -> None:
        self.kit = kit

    async def run(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Halt | None:
        it = state.iteration.get(step.id, 0)
        args = self.kit.args(tool, state, step)
        out = await self.kit.gated(tool, state, step, args, key=f"{state.session_id}:{step.id}:{it}")
        if isinstance(out, Halt):
            return out
        state.outputs[step.id] = out
        return None
