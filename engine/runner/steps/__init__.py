"""Step handlers: one object per kind of step, each ``run(wf, state, step) -> Stop | Redo | None``."""

from __future__ import annotations

from hitl.engine.runner.steps.agent import AgentHandler
from hitl.engine.runner.steps.batch import BatchHandler
from hitl.engine.runner.steps.gate import GateHandler
from hitl.engine.runner.steps.loop import LoopHandler
from hitl.engine.runner.steps.tool import ToolHandler

__all__ = ["AgentHandler", "BatchHandler", "GateHandler", "LoopHandler", "ToolHandler"]
