"""Everything the listeners need, built once per app by the composition root (no globals)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from bot.metrics import Metrics
from bot.notifier import SlackNotifier
from bot.reviewers import ReviewerDirectory
from bot.signing import Signer
from engine.config import HitlConfig
from engine.domain.models import Approval
from engine.ports import Store
from engine.runner.schema import ArgSpec, ToolSchema
from engine.runner.spec import load_workflow
from engine.runner.state import RunState
from engine.runner.tools import load_tools
from engine.service import ApprovalService

__all__ = ["BotContext"]

log = logging.getLogger("hitl.bot")


@dataclass
class BotContext:
    service: ApprovalService
    config: HitlConfig
    directory: ReviewerDirectory
    notifier: SlackNotifier
    metrics: Metrics
    signer: Signer
    replica: str
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    inflight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    def tracked(self, handler: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """Wrap a listener so callers can wait until every request's work after ``ack()`` is done."""

        @functools.wraps(handler)
        async def run(*args: Any, **kwargs: Any) -> None:
            self.inflight += 1
            self._idle.clear()
            try:
                await handler(*args, **kwargs)
            finally:
                self.inflight -= 1
                if self.inflight == 0:
                    self._idle.set()

        return run

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no listener is running (Slack got its ack earlier; this waits for the rest)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    @property
    def store(self) -> Store:
        return self.service.store

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        """Fire-and-forget work after ``ack()``: keep a reference, and log (never lose) its errors."""
        task = asyncio.create_task(coro, name=name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def schema_for(self, a: Approval) -> ToolSchema:
        """The tool's schema from the run's workflow; for ask-API approvals, inferred from the arguments."""
        found = await self.store.runs.load(a.session_id)
        if found is not None:
            try:
                state = RunState.model_validate({**found[0], "version": found[1]})
                wf = load_workflow(state.workflow_path)
                tools = load_tools(wf.spec.tools, base=wf.path.parent)
                if a.tool in tools and tools[a.tool].schema.args:
                    return tools[a.tool].schema
            except Exception:  # a missing or broken workflow file: fall back to inference
                log.warning("cannot load the workflow of %s; inferring the form from its arguments", a.id)
        declared = self.config.policy.tools.get(a.tool)
        if declared is not None and declared.schema_:
            return ToolSchema(a.tool, dict(declared.schema_))
        return infer_schema(a.tool, a.execute_args)


def infer_schema(tool: str, args: dict[str, Any]) -> ToolSchema:
    specs: dict[str, ArgSpec] = {}
    for name, value in args.items():
        if isinstance(value, bool):
            specs[name] = ArgSpec(type="boolean")
        elif isinstance(value, int):
            specs[name] = ArgSpec(type="integer")
        elif isinstance(value, float):
            specs[name] = ArgSpec(type="number")
        elif isinstance(value, dict):
            specs[name] = ArgSpec(type="object")
        elif isinstance(value, list):
            specs[name] = ArgSpec(type="array")
        else:
            specs[name] = ArgSpec(type="string", multiline=isinstance(value, str) and len(value) > 80)
    return ToolSchema(tool, specs)
