"""A plain tool step: propose, wait for a human when the policy says so, run the effect once."""

from __future__ import annotations

from engine.runner.kit import StepKit
from engine.runner.outcomes import Halt
from engine.runner.spec import LoadedWorkflow, ToolStep
from engine.runner.state import RunState
from engine.runner.tools import Tool

__all__ = ["ToolHandler"]


class ToolHandler:
    def __init__(self, kit: StepKit) -> None:
        self.kit = kit

    async def run(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Halt | None:
        it = state.iteration.get(step.id, 0)
        args = self.kit.args(tool, state, step)
        out = await self.kit.gated(tool, state, step, args, key=f"{state.session_id}:{step.id}:{it}")
        if isinstance(out, Halt):
            return out
        state.outputs[step.id] = out
        return None
