"""The durable workflow runner."""

from __future__ import annotations

from engine.runner.executor import Runner, RunResult
from engine.runner.spec import LoadedWorkflow, Workflow, load_workflow
from engine.runner.state import RunState, RunStatus

__all__ = ["LoadedWorkflow", "RunResult", "RunState", "RunStatus", "Runner", "Workflow", "load_workflow"]
