"""Composition root for the CLI: settings from flags and environment -> store, config, service, runner."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.clock import SystemClock
from engine.config import HitlConfig, load_config
from engine.errors import ErrorCode, InvalidInput
from engine.ports import Clock, Store
from engine.runner.executor import Runner
from engine.runner.spec import LoadedWorkflow
from engine.runner.tools import Tool, load_tools
from engine.service import ApprovalService
from engine.storage.factory import DEFAULT_STORE_URL, open_store
from engine.testing.clock import FakeClock

__all__ = ["Settings", "open_app"]


@dataclass(frozen=True)
class Settings:
    """Where things are: flags win over environment variables, which win over defaults."""

    store_url: str
    config_path: str | None
    reviewer: str | None
    now: float | None = None
    """``HITL_NOW`` (epoch seconds): a frozen clock, for tests and rehearsals of expiry."""

    @classmethod
    def resolve(cls, *, store: str | None, config: str | None, reviewer: str | None) -> Settings:
        return cls(
            store_url=store or os.environ.get("HITL_STORE") or DEFAULT_STORE_URL,
            config_path=config or os.environ.get("HITL_CONFIG") or None,
            reviewer=reviewer or os.environ.get("HITL_REVIEWER") or None,
            now=_float_env("HITL_NOW"),
        )

    def config_for(self, workflow: LoadedWorkflow | None = None, recorded: str | None = None) -> str | None:
        """--config / HITL_CONFIG, else the run's recorded config, else the workflow's, else ./hitl.yaml."""
        if self.config_path:
            return self.config_path
        if recorded:
            return recorded
        if workflow is not None:
            if workflow.spec.config:
                return str((workflow.path.parent / workflow.spec.config).resolve())
            beside = workflow.path.parent / "hitl.yaml"
            if beside.exists():
                return str(beside)
        return "hitl.yaml" if Path("hitl.yaml").exists() else None

    def require_reviewer(self) -> str:
        if not self.reviewer:
            raise InvalidInput(
                "say who is deciding: pass --as REVIEWER or set HITL_REVIEWER", code=ErrorCode.INVALID_INPUT
            )
        return self.reviewer


@dataclass
class App:
    settings: Settings
    store: Store
    config: HitlConfig
    config_path: str | None
    service: ApprovalService
    runner: Runner
    tools: dict[str, Tool]


@asynccontextmanager
async def open_app(
    settings: Settings,
    *,
    workflow: LoadedWorkflow | None = None,
    recorded_config: str | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[App]:
    path = settings.config_for(workflow, recorded_config)
    config = load_config(path)
    if workflow is not None:
        config = _with_workflow_policies(config, workflow)
    tools = load_tools(workflow.spec.tools, base=workflow.path.parent) if workflow is not None else {}

    def validate(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return tools[tool].schema.validate(args) if tool in tools else args

    store = open_store(settings.store_url)
    try:
        clock = clock or (FakeClock(settings.now) if settings.now is not None else SystemClock())
        service = ApprovalService.from_config(config, store=store, clock=clock, validate_args=validate)
        yield App(settings, store, config, path, service, Runner(service), tools)
    finally:
        await store.close()


def _float_env(name: str) -> float | None:
    raw = os.environ.get(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput(f"{name}={raw!r} is not a number of epoch seconds") from None


def _with_workflow_policies(config: HitlConfig, wf: LoadedWorkflow) -> HitlConfig:
    """Add tool policies declared in the workflow for tools hitl.yaml does not mention (hitl.yaml wins)."""
    extra = {n: t.policy for n, t in wf.spec.tools.items() if t.policy is not None and n not in config.policy.tools}
    if not extra:
        return config
    policy = config.policy.model_copy(update={"tools": {**config.policy.tools, **extra}})
    return config.model_copy(update={"policy": policy})
