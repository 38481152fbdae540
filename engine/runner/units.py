"""One step of any kind, run (or resumed) wherever a pattern places it."""

from __future__ import annotations

from typing import Any

from engine.runner.agents import AgentBackend
from engine.runner.effects import EffectFailed
from engine.runner.kit import StepKit
from engine.runner.outcomes import Halt, Redo
from engine.runner.spec import AgentStep, GateStep, LoadedWorkflow, Step
from engine.runner.state import RunState, RunStatus
from engine.runner.steps import AgentHandler, BatchHandler, GateHandler, LoopHandler, ToolHandler
from engine.runner.tools import Tool

__all__ = ["StepRunner"]


class StepRunner:
    """Dispatches a step to its handler; a tool that raised stops the run as failed (``hitl resume`` retries)."""

    def __init__(self, kit: StepKit, agents: AgentBackend | None = None) -> None:
        self.kit = kit
        self.tool = ToolHandler(kit)
        self.batch = BatchHandler(kit)
        self.loop = LoopHandler(kit)
        self.gate = GateHandler(kit)
        self.agent = AgentHandler(kit, agents)

    async def run(
        self,
        wf: LoadedWorkflow,
        tools: dict[str, Tool],
        state: RunState,
        step: Step,
        *,
        before: Step | None = None,
        **extra: Any,
    ) -> Halt | Redo | None:
        """Run ``step``; ``before`` is the step a gate reviews; ``extra`` joins an agent's template scope."""
        try:
            if isinstance(step, GateStep):
                return await self.gate.run(wf, state, step, before)
            if isinstance(step, AgentStep):
                return await self.agent.run(wf, tools, state, step, **extra)
            if step.for_each:
                return await self.batch.run(wf, tools[step.tool], state, step)
            if step.repeat:
                return await self.loop.run(wf, tools[step.tool], state, step)
            return await self.tool.run(wf, tools[step.tool], state, step)
        except EffectFailed as exc:
            return Halt(RunStatus.FAILED, reason=exc.message)
