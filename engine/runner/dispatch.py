"""One step of any kind, run (or resumed) wherever a pattern places it."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.errors import Halted
from hitl.engine.execution.effects import EffectFailed
from hitl.engine.execution.tools import Tool
from hitl.engine.runner.agent_backend import AgentBackend
from hitl.engine.runner.outcomes import Redo, Stop, paused_by_halt
from hitl.engine.runner.step_context import StepContext
from hitl.engine.runner.steps import AgentHandler, BatchHandler, GateHandler, LoopHandler, ToolHandler
from hitl.engine.workflow.definition import AgentStep, GateStep, LoadedWorkflow, Step

__all__ = ["StepRunner"]


class StepRunner:
    """Dispatches a step to its handler; a tool that raised stops the run as failed (``hitl resume`` retries)."""

    def __init__(self, context: StepContext, agents: AgentBackend | None = None) -> None:
        self.context = context
        self.tool = ToolHandler(context)
        self.batch = BatchHandler(context)
        self.loop = LoopHandler(context)
        self.gate = GateHandler(context)
        self.agent = AgentHandler(context, agents)

    async def run(
        self,
        wf: LoadedWorkflow,
        tools: dict[str, Tool],
        state: RunState,
        step: Step,
        *,
        before: Step | None = None,
        **extra: Any,
    ) -> Stop | Redo | None:
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
            return Stop(RunStatus.FAILED, reason=exc.message)
        except Halted as exc:  # the stop switch, whichever part of the step met it: paused until the lift
            return paused_by_halt(exc)
