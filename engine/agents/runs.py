"""Interrupted agent runs: which approvals a stopped agent waits for, and the framework's state to resume it.

Frameworks that stop instead of waiting (Strands interrupts, OpenAI Agents interruptions, Pydantic AI deferred
tools) leave a run that any process may continue once every approval is decided. The record lives in the run store
under ``agent:<framework>:<session>`` with status ``interrupted`` (workflow recovery never touches it), saved by
compare-and-swap; continuing it is owned by one process at a time through the run store's lease, so two processes
never resume the same run.

Frameworks whose paused runs can be continued without the caller (a LangGraph thread lives in its checkpointer)
register an :class:`AgentResumer` with an :class:`AgentWatcher`: a run that stops on approvals leaves a durable
watch job in the store (:meth:`AgentRuns.watch`), and the watcher continues it once every approval is decided,
whichever process or surface decided, and after any crash (an unfinished job is delivered again).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from hitl.engine.agents.gate import ToolGate
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode, StaleVersion
from hitl.engine.process.tasks import Periodic

__all__ = ["AgentResumer", "AgentRuns", "AgentWatcher", "Interrupted"]

log = logging.getLogger(__name__)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_WATCH = "agent:"
"""Job kind prefix of watch jobs: ``agent:<framework>``."""
_HOLD = 60.0
"""Seconds a watch job stays with a watcher that took it: one that dies mid-continue hands it on after this (a
second watcher then finds the run held by the first, or finished)."""


@dataclass(frozen=True)
class Interrupted:
    """A stopped agent run: its approvals (by the framework's key for each call) and its serialized state."""

    session: str
    approvals: dict[str, str]
    state: Any
    version: int


class AgentRuns:
    """Save, find and continue interrupted runs of one framework.

    Args:
        gate: the tool gate (store, clock, worker id).
        framework: the framework's name (part of the record's id).
        lease: seconds a process owns a resume before another may take it over.
    """

    def __init__(self, gate: ToolGate, framework: str, *, lease: float = 300.0) -> None:
        self.gate = gate
        self.framework = framework
        self.lease = lease

    def run_id(self, session: str) -> str:
        return f"agent:{self.framework}:{session}"

    async def save(self, session: str, *, approvals: dict[str, str], state: Any) -> Interrupted:
        """Record (or replace) the run's interruption: ``approvals`` maps the framework's key to an approval id."""
        store = self.gate.service.store
        for _ in range(5):
            found = await store.runs.load(self.run_id(session))
            version = found.version if found else 0
            data = {
                "status": "interrupted",
                "kind": "agent",
                "framework": self.framework,
                "session": session,
                "approvals": dict(approvals),
                "state": state,
            }
            try:
                new = await store.runs.save(
                    self.run_id(session), data, expected_version=version, now=self.gate.service.clock.now()
                )
            except StaleVersion:
                continue
            return Interrupted(session, dict(approvals), state, new)
        raise EngineError(
            f"the {self.framework} run of {session} keeps changing; try again", code=ErrorCode.STALE_VERSION
        )

    async def watch(self, session: str, approval_ids: Sequence[str]) -> None:
        """Leave a durable job that continues the run once every one of ``approval_ids`` is decided (done before
        the run stops, so no crash can lose it; a duplicate is harmless, continuing is idempotent)."""
        service = self.gate.service
        payload = {"session": session, "approvals": list(approval_ids)}
        await service.store.jobs.enqueue(f"{_WATCH}{self.framework}", payload, now=service.clock.now())

    async def load(self, session: str) -> Interrupted | None:
        """The run's interruption, or None when it has none (never interrupted, or already continued)."""
        found = await self.gate.service.store.runs.load(self.run_id(session))
        if found is None or found.status != "interrupted":
            return None
        return Interrupted(session, dict(found.data.get("approvals") or {}), found.data.get("state"), found.version)

    async def decided(self, run: Interrupted) -> dict[str, Approval] | None:
        """Each call's standing approval (following modifications), or None while any is still pending."""
        return await _decisions(self.gate, run.approvals)

    async def ready(self, session: str) -> tuple[Interrupted, dict[str, Approval]] | None:
        """The session's interruption with every decision, now owned by this process to continue; None when
        nothing waits, any approval is still pending, or another process is continuing it."""
        run = await self.load(session)
        if run is None:
            return None
        decided = await self.decided(run)
        if decided is None or not await self.take(session):
            return None
        return run, decided

    async def continued(self, session: str, go: Callable[[Interrupted, dict[str, Approval]], Awaitable[T]]) -> T | None:
        """``go(run, decisions)`` once every approval of ``session``'s interruption is decided, owning the
        continuation while it runs and marking the interruption over after; None when nothing waits, an approval
        is still pending, or another process is continuing it. Each framework's ``resume`` is its ``go``."""
        ready = await self.ready(session)
        if ready is None:
            return None
        run, decided = ready
        try:
            return await go(run, decided)
        finally:
            await self.finished(run)

    async def take(self, session: str) -> bool:
        """Own the continuation of ``session``'s run; False when another process is continuing it."""
        store, clock = self.gate.service.store, self.gate.service.clock
        return await store.runs.own(self.run_id(session), holder=self.gate.worker_id, now=clock.now(), lease=self.lease)

    async def finished(self, run: Interrupted, *, state: Any = None) -> None:
        """The run was continued: its interruption is over (it may be saved again if it stops again)."""
        store, clock = self.gate.service.store, self.gate.service.clock
        data = {"status": "continued", "kind": "agent", "framework": self.framework, "session": run.session}
        if state is not None:
            data["state"] = state
        try:
            await store.runs.save(self.run_id(run.session), data, expected_version=run.version, now=clock.now())
        except StaleVersion:
            pass  # it stopped again while continuing: the newer interruption stands
        finally:
            await self.release(run.session)

    async def release(self, session: str) -> None:
        """Give up the continuation of ``session``'s run (taken with :meth:`take`)."""
        await self.gate.service.store.runs.release(self.run_id(session), holder=self.gate.worker_id)


async def _decisions(gate: ToolGate, approvals: Mapping[K, str]) -> dict[K, Approval] | None:
    """Each key's standing approval (following modifications), or None while any is still pending."""
    out: dict[K, Approval] = {}
    for key, approval_id in approvals.items():
        approval = await gate.effects.follow(await gate.service.store.approvals.get(approval_id))
        if approval.is_open:
            return None
        out[key] = approval
    return out


class AgentResumer(Protocol):
    """Continues a framework's paused runs without the caller (implemented by the LangGraph adapter's resumer)."""

    framework: str

    async def continue_run(self, session: str) -> bool:
        """Continue ``session``'s run if everything it waits for is decided. True when finished with it
        (continued, or nothing waits any more); False to look again later (another process holds it). Raising
        means try again later too."""
        ...


class AgentWatcher:
    """Continues watched agent runs once their approvals are decided: the agent process's background loop.

    Args:
        gate: the tool gate (store, clock, worker id).
        resumers: one per framework this process can continue.
        interval: seconds between rounds: the most a decision waits before its run continues.
        limit: watch jobs looked at per framework per round.
    """

    def __init__(
        self, gate: ToolGate, resumers: Sequence[AgentResumer], *, interval: float = 2.0, limit: int = 50
    ) -> None:
        self.gate = gate
        self.resumers = {r.framework: r for r in resumers}
        self.interval = interval
        self.limit = limit
        self._periodic = Periodic("hitl-agent-watcher", self._round, interval=interval)

    async def tick(self) -> int:
        """One round: continue every claimable watched run whose approvals are all decided; returns how many
        runs were finished with."""
        store, clock = self.gate.service.store, self.gate.service.clock
        finished = 0
        for framework, resumer in self.resumers.items():
            jobs = await store.jobs.claim(
                self.gate.worker_id, kind=f"{_WATCH}{framework}", limit=self.limit, now=clock.now(), lease=_HOLD
            )
            for job in jobs:
                ids = [str(i) for i in job.payload.get("approvals") or ()]
                done = False
                try:
                    if await _decisions(self.gate, dict(enumerate(ids))) is not None:
                        done = await resumer.continue_run(str(job.payload["session"]))
                except Exception:
                    log.exception("continuing the %s run of %s failed; it will be tried again", framework, job.id)
                if not done:
                    # Looked at again next round: a copy is queued before this one is acknowledged, so a crash
                    # in between leaves a duplicate (harmless), never nothing. (A lease would also redeliver it,
                    # but on the store's clock, not ours.)
                    await store.jobs.enqueue(job.kind, job.payload, now=clock.now())
                else:
                    finished += 1
                await store.jobs.ack(job.id)
        return finished

    def start(self) -> None:
        """Run rounds in the background every ``interval`` seconds until :meth:`stop`."""
        self._periodic.start()

    async def stop(self) -> None:
        """Stop watching; the round under way finishes first."""
        await self._periodic.stop()

    async def _round(self) -> None:
        await self.tick()
