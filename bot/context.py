"""Everything the listeners need, built once per app by the composition root (no globals)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from hitl.bot.metrics import Metrics
from hitl.bot.outbound.home_tabs import HomeTabs
from hitl.bot.outbound.notifier import SlackNotifier
from hitl.bot.requests.signing import Signer
from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.delegation.delegates import DelegateRule
from hitl.engine.delegation.delegations import Delegations
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.models import Approval
from hitl.engine.ports import Clock, ReviewerDirectory, Store
from hitl.engine.runtime.lifecycle import RunLifecycle

__all__ = ["BotContext"]

_LOOKED = 10_000
"""At most this many approvals remembered as looked at (the oldest forgotten first)."""

log = logging.getLogger(__name__)


@dataclass
class BotContext:
    """What every listener shares: the run lifecycle, the configuration, the reviewer directory, the cards."""

    lifecycle: RunLifecycle
    config: HitlConfig
    reviewers: ReviewerDirectory
    notifier: SlackNotifier
    metrics: Metrics
    signer: Signer
    replica: str
    home: HomeTabs
    """Each reviewer's Home tab (their inbox), kept current."""
    answer_budget: float = 2.0
    """Seconds from a request's arrival within which its decision must be recorded: the store refuses it after
    that (``too_late``), and the person is told it was not recorded. Leaves room in Slack's 3 s for the rest."""
    inflight: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _looked: dict[str, None] = field(default_factory=dict)
    """Approvals whose first interaction this process counted, or found counted (insertion-ordered, bounded): the
    clicks after the first cost no store round trip."""

    def __post_init__(self) -> None:
        self._idle.set()

    @property
    def store(self) -> Store:
        return self.lifecycle.store

    @property
    def clock(self) -> Clock:
        return self.lifecycle.contexts.clock

    @property
    def delegations(self) -> Delegations:
        """The store's delegations (the ones the reviewer directory adds to a reviewer)."""
        return self.lifecycle.contexts.default.service.delegations

    @property
    def delegates(self) -> DelegateRule:
        """Who a delegation may be handed to (the rule every surface gives with)."""
        return self.lifecycle.contexts.default.service.delegates

    def tracked(self, handler: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """Wrap a listener so callers can wait until every request's work after ``ack()`` is done."""

        @functools.wraps(handler)
        async def run(*args: Any, **kwargs: Any) -> None:
            self._busy(+1)
            try:
                await handler(*args, **kwargs)
            finally:
                self._busy(-1)

        return run

    def acked(self, handler: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """Wrap a listener that answers Slack with an empty ack before its work: the wrapper acks, runs
        ``handler`` (which then must not ack) in a task counted like :meth:`tracked`, and returns at once, so Bolt
        answers Slack without waiting for the work. The handler catches its own errors (nobody awaits the task
        but :meth:`wait_idle`). Bolt still sees the handler's parameters (``functools.wraps``)."""

        @functools.wraps(handler)
        async def run(*args: Any, **kwargs: Any) -> None:
            ack: AsyncAck = kwargs["ack"]
            await ack()
            self._busy(+1)  # counted before the task starts, so wait_idle cannot slip in between
            task = asyncio.create_task(self._finish(handler(*args, **kwargs)))
            self._tasks.add(task)  # held until done: the loop keeps only a weak reference to tasks
            task.add_done_callback(self._tasks.discard)

        return run

    def later(self, work: Awaitable[None]) -> None:
        """Run ``work`` after the answer to Slack (a follow-up message, a correction), counted like
        :meth:`tracked` so :meth:`wait_idle` waits for it; its errors are logged, never raised."""
        self._busy(+1)
        task = asyncio.create_task(self._finish(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception:  # a handler's own net failed: say so, and keep serving
            log.exception("a Slack listener failed after its ack")
        finally:
            self._busy(-1)

    def _busy(self, delta: int) -> None:
        self.inflight += delta
        if self.inflight == 0:
            self._idle.set()
        else:
            self._idle.clear()

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no listener is running (Slack got its ack earlier; this waits for the rest)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def looked(self, approval_id: str, user: str) -> None:
        """Count ``user``'s interaction with an approval toward its time to first interaction, when they may decide
        it (a stranger's click, or the requester's own look, counts for nothing and writes nothing)."""
        if approval_id in self._looked:
            return
        try:
            a = await self.store.approvals.get(approval_id)
            reviewer = await self.reviewers.reviewer(user)
        except Exception as exc:  # a count never fails what the person did
            log.info("not counting an interaction with %s: %s", approval_id, exc)
            return
        if eligible(a, reviewer, self.clock.now()) or any(d.reviewer == user for d in a.decisions):
            await self.lifecycle.interacted(a)
            self._looked[approval_id] = None
            if len(self._looked) > _LOOKED:
                del self._looked[next(iter(self._looked))]

    def schema_for(self, a: Approval) -> dict[str, Any] | None:
        """The JSON Schema the Modify form is built from: the approval's own snapshot (what the asker declared
        when it asked), else for approvals made before snapshots the one ``hitl.yaml`` declares; None means a
        JSON editor. Never the workflow's tool module: the bot does not import user code to draw a form."""
        if a.args_schema is not None:
            return a.args_schema
        declared = self.config.policy.tools.get(a.tool)
        return declared.schema_ if declared is not None else None
