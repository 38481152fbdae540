"""Interrupted agent runs: which approvals a stopped agent waits for, and the framework's state to resume it.

Frameworks that stop instead of waiting (Strands interrupts, OpenAI Agents interruptions, Pydantic AI deferred
tools) leave a run that any process may continue once every approval is decided. The record lives in the run store
under ``agent:<framework>:<session>`` with status ``interrupted`` (workflow recovery never touches it), saved by
compare-and-swap; continuing it is owned by one process at a time through the run store's lease, so two processes
never resume the same run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.domain.models import Approval
from engine.errors import EngineError, ErrorCode, StaleVersion
from engine.gate import ToolGate

__all__ = ["AgentRuns", "Interrupted"]


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
            version = found[1] if found else 0
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

    async def load(self, session: str) -> Interrupted | None:
        """The run's interruption, or None when it has none (never interrupted, or already continued)."""
        found = await self.gate.service.store.runs.load(self.run_id(session))
        if found is None or found[0].get("status") != "interrupted":
            return None
        data, version = found
        return Interrupted(session, dict(data.get("approvals") or {}), data.get("state"), version)

    async def decided(self, run: Interrupted) -> dict[str, Approval] | None:
        """Each call's standing approval (following modifications), or None while any is still pending."""
        out: dict[str, Approval] = {}
        for key, approval_id in run.approvals.items():
            approval = await self.gate.effects.follow(await self.gate.service.store.approvals.get(approval_id))
            if approval.is_open:
                return None
            out[key] = approval
        return out

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
