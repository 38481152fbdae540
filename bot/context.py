"""Everything the listeners need, built once per app by the composition root (no globals)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.metrics import Metrics
from bot.notifier import SlackNotifier
from bot.reviewers import ReviewerDirectory
from bot.signing import Signer
from engine.config import HitlConfig
from engine.domain.argspec import ArgSpec
from engine.domain.models import Approval
from engine.lifecycle import RunLifecycle
from engine.ports import Clock, Store
from engine.runner.schema import ToolSchema

__all__ = ["BotContext"]

log = logging.getLogger(__name__)


@dataclass
class BotContext:
    lifecycle: RunLifecycle
    config: HitlConfig
    directory: ReviewerDirectory
    notifier: SlackNotifier
    metrics: Metrics
    signer: Signer
    replica: str
    inflight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    @property
    def store(self) -> Store:
        return self.lifecycle.store

    @property
    def clock(self) -> Clock:
        return self.lifecycle.worlds.clock

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

    async def schema_for(self, a: Approval) -> ToolSchema:
        """The approval's own schema snapshot (what the asker declared when it asked), else for older approvals the
        schema in its world, hitl.yaml's, or one inferred from the arguments."""
        if a.args_schema is not None:
            return ToolSchema.from_json_schema(a.tool, a.args_schema)
        try:
            world = await self.lifecycle.world_of(a)
        except Exception:  # a missing or broken workflow file: fall back to what the arguments show
            log.warning("cannot load the world of %s; inferring the form from its arguments", a.id)
        else:
            tool = world.tools.get(a.tool)
            if tool is not None and tool.schema.args:
                return tool.schema
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
