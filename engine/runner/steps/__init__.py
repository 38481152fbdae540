"""Step handlers: one object per kind of step, each ``run(wf, state, step) -> Halt | Redo | None``."""

from __future__ import annotations

from engine.runner.steps.agent import AgentHandler
from engine.runner.steps.batch import BatchHandler
from engine.runner.steps.gate import GateHandler
from engine.runner.steps.loop import LoopHandler
from engine.runner.steps.tool import ToolHandler

__all__ = ["AgentHandler", "BatchHandler", "GateHandler", "LoopHandler", "ToolHandler"]
