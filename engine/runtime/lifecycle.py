"""The run lifecycle: a decision, what it does to the run waiting on it, and the background work that keeps
runs moving (resume jobs, recovery of resumes lost to a crash, expiry fallbacks).

Every surface decides through :meth:`RunLifecycle.decide`: Slack clicks, modals and commands, the CLI, the
Python API. A decision on an approval some run waits on either resumes the run right here (``resume="inline"``,
what the CLI does) or enqueues a durable resume job (``resume="queue"``, what ``hitl serve`` does) that any
worker picks up. Either way the run continues in its own context (:mod:`.compose`), never in the deciding
process's default one. How it went is told through a :class:`~hitl.engine.ports.RunReporter` (the bot posts in the
card's thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from hitl.engine.deciding.groups import ReadMember, decide_group
from hitl.engine.domain.decide import RESUME_JOB
from hitl.engine.domain.group_outcome import GroupOutcome
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.domain.requests import DecideRequest, GroupDecideRequest
from hitl.engine.domain.runs import RunResult, RunState, RunStatus
from hitl.engine.errors import EngineError, ErrorCode, NotFound
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import RunReporter, Store
from hitl.engine.process.log_context import about
from hitl.engine.runner.outcomes import HALTED_PREFIX
from hitl.engine.runtime.compose import RunContext, RunContexts
from hitl.engine.service import AnswerWindow

if TYPE_CHECKING:  # a run's workflow arrives loaded; its models are imported by whoever loaded it
    from hitl.engine.workflow.definition import LoadedWorkflow

__all__ = ["Decided", "Resume", "RunLifecycle", "run_of"]

log = logging.getLogger(__name__)

Resume = Literal["queue", "inline", "none"]
"""What a decision does to the run waiting on it: enqueue a durable resume job, resume it in this process and
return the result, or nothing (the caller continues the run itself)."""

_DECIDED = frozenset({Status.APPROVED, Status.REJECTED, Status.EXPIRED, Status.CANCELLED, Status.SUPERSEDED})
_POLICY_FREE = frozenset({DecisionKind.APPROVE, DecisionKind.REJECT, DecisionKind.FEEDBACK})


@dataclass(frozen=True)
class Decided:
    """A recorded decision and, when it was resumed inline, where its run stands now."""

    approval: Approval
    run: RunResult | None = None


def run_of(a: Approval) -> str | None:
    """The run an approval pauses, if it belongs to one (workflow steps record their step)."""
    return a.session_id if a.metadata.get("step") else None


class RunLifecycle:
    """Decisions and the runs that wait on them.

    Args:
        contexts: composes each run's context (its recorded config, its workflow).
        reporter: tells people how runs went on; optional.
        worker_id: names this process as a job consumer.
        lease: seconds a claimed resume job stays with this worker before another may take it over (a resume
            that takes longer is harmless: the run's own lease keeps a second worker from driving it).
    """

    def __init__(
        self, contexts: RunContexts, *, reporter: RunReporter | None = None, worker_id: str = "hitl", lease: float = 6.0
    ) -> None:
        self.contexts = contexts
        self.reporter = reporter
        self.worker_id = worker_id
        self.lease = lease
        self.work = asyncio.Event()
        """Set when a resume job was queued here: a background loop waits on it instead of its full interval."""
        self._halted: frozenset[str] | None = None

    @property
    def store(self) -> Store:
        return self.contexts.store

    async def context_of(self, approval: Approval, state: RunState | None = None) -> RunContext:
        """The context an approval's decisions are judged in: its run's (from ``state``, its checkpoint, when the
        caller read it), or the default one."""
        found = await self._state_of(approval, state)
        return self.contexts.for_state(found) if found is not None else self.contexts.default

    # -- deciding -----------------------------------------------------------------------------------------
    async def decide(
        self,
        request: DecideRequest,
        *,
        resume: Resume = "queue",
        force: bool = False,
        actor: str | None = None,
        window: AnswerWindow | None = None,
        seen: Approval | None = None,
        state: RunState | None = None,
    ) -> Decided:
        """Record one decision in the approval's own run context, then continue its run as ``resume`` says.

        A decision that leaves a run's approval decided queues the run's resume in the store's same atomic step
        (``resume="queue"``: a worker of ``hitl serve`` continues it; ``"inline"``: this process continues it right
        here, the queued job finding nothing left to do; ``"none"``: the caller continues it itself, nothing is
        queued). With ``resume="inline"`` a run whose workflow file changed is refused before anything is
        recorded, unless ``force``. ``window``: a surface that must answer in time learns there the moment the
        decision is recorded, and the store refuses it after the window's deadline. ``seen`` and ``state``: the
        approval and its run's checkpoint as the caller already read them (each is read at most once).
        """
        approval_id = request.approval_id
        with about(approval_id=approval_id):
            check = resume == "inline" and not force
            approval = seen if seen is not None and seen.id == approval_id else None
            if request.kind in _POLICY_FREE and isinstance(request.reviewer, Reviewer) and not check:
                # Only a modify (the policy runs again on the edit), a trust (its grant's lifetime), a reviewer
                # named by id (roles from the run's config) and an inline resume (its workflow is checked) need the
                # run's context; the rest are judged from what the approval itself records. A fully bound approve
                # is then one atomic store step, no read first. (A surface that resolved the reviewer serves one
                # hitl.yaml, the default context's: the view it drew is checked in those words.)
                context = self.contexts.default
            else:
                approval = approval or await self.store.approvals.get(approval_id)
                state = await self._state_of(approval, state)
                context = self.contexts.for_state(state) if state is not None else self.contexts.default
                if check and state is not None and context.workflow is not None:
                    from hitl.engine.runner.checks import changed_since_paused  # with the run's workflow: see start

                    changed = changed_since_paused(state, context.workflow)
                    if changed is not None:  # refused before deciding: no decision lands on a run that cannot go on
                        raise changed[1]
            if not isinstance(request.reviewer, Reviewer):
                request = replace(request, reviewer=await context.service.reviewers.reviewer(request.reviewer))
            updated = await context.service.decide(request, window=window, resume=resume != "none", current=approval)
            run = run_of(updated)
            if run is None or updated.status not in _DECIDED or resume == "none":
                return Decided(updated)
            if resume == "queue":
                self.work.set()  # the store queued the resume with the decision: wake this process's worker
                return Decided(updated)
            try:
                result = await self.resume(run, force=force, actor=actor or request.reviewer_id, state=state)
            except EngineError as exc:
                if exc.code is not ErrorCode.CLAIM_IN_PROGRESS:
                    raise
                # Another worker took the queued resume first: the run continues there.
                return Decided(updated)
            # Resumed here: the resume queued with the decision (for a crash before this point) is moot.
            await self.store.jobs.settle(RESUME_JOB, approval_id=updated.id)
            return Decided(updated, result)

    async def decide_group(
        self,
        request: GroupDecideRequest,
        *,
        resume: Resume = "queue",
        read: ReadMember | None = None,
        seen: Mapping[str, Approval] | None = None,
    ) -> GroupOutcome:
        """Record one decision on a group (:mod:`~hitl.engine.deciding.groups`): each member through :meth:`decide`
        in its own run context and atomic step, each refusal audited; returns every member's outcome once all are
        recorded. ``read``: how a member is read (a surface that may not show every approval refuses the others as
        not found); ``seen``: members the caller already read. ``resume="inline"`` is not offered: a group's runs
        go on through their queued resume jobs."""
        if resume == "inline":
            raise ValueError("a group decision queues its runs' resumes: pass resume='queue' or 'none'")

        async def one(member: DecideRequest, approval: Approval) -> Approval:
            return (await self.decide(member, resume=resume, seen=approval)).approval

        return await decide_group(
            request, read=read or self.store.approvals.get, decide=one, refused=self.refused, seen=seen
        )

    async def _state_of(self, approval: Approval, known: RunState | None) -> RunState | None:
        """The checkpoint of the run ``approval`` pauses: ``known`` when it is that run's, else read once."""
        run = run_of(approval)
        if run is None:
            return None
        if known is not None and known.session_id == run:
            return known
        found = await self.store.runs.load(run)
        return RunState.of(found) if found is not None else None

    def check_overrides(self, state: RunState, overrides: dict[str, Any]) -> None:
        """Refuse new variable values a resume of ``state`` would refuse (an ended run, an unknown or missing
        variable), before anything is decided: the checks :meth:`resume` makes, made first."""
        from hitl.engine.runner.checks import vars_after  # imported with the workflow it checks, as in start

        vars_after(state, self.contexts.workflows.load(state.workflow_path), overrides)

    async def interacted(self, approval: Approval) -> None:
        """Count a reviewer's first interaction with ``approval`` (a button, a view, ``/hitl show``) for the time
        to first interaction per rank band; only the first counts, across processes. The surface checked that the
        person may decide it."""
        await self.contexts.default.service.first_interaction(approval)

    async def refused(self, approval_id: str, actor: str, code: ErrorCode | str, detail: str) -> None:
        """Audit a refusal a surface made before any decision reached the engine (an altered form, a stranger)."""
        await self.contexts.default.service.record_refusal(approval_id, actor, code, detail)

    # -- runs ---------------------------------------------------------------------------------------------
    async def start(
        self,
        workflow: LoadedWorkflow,
        given_vars: dict[str, Any],
        *,
        session_id: str | None = None,
        requester: str | None = None,
        on_behalf_of: str | None = None,
    ) -> RunResult:
        """Start a run of ``workflow`` in its context; the run records that context's config for its whole life.
        ``on_behalf_of``: the person it acts for, as the calling surface authenticated them (tier ``self``)."""
        context = self.contexts.for_workflow(workflow)
        return await context.runner.start(
            workflow,
            given_vars,
            session_id=session_id,
            requester=requester,
            config_path=context.config_path,
            on_behalf_of=on_behalf_of,
        )

    async def resume(
        self,
        session_id: str,
        *,
        force: bool = False,
        actor: str = "cli",
        overrides: dict[str, Any] | None = None,
        state: RunState | None = None,
    ) -> RunResult:
        """Continue the run ``session_id`` in its own context, from its checkpoint (``overrides``: new values for
        its variables, used by the steps still to come; ``state``: its checkpoint as the caller read it)."""
        if state is not None and state.session_id == session_id:
            context = self.contexts.for_state(state)
        else:
            context = await self.contexts.for_session(session_id)
        if context.workflow is None:
            raise NotFound.run(session_id)
        return await context.runner.resume(
            session_id, force=force, actor=actor, overrides=overrides, workflow=context.workflow
        )

    # -- the stop switch -----------------------------------------------------------------------------------
    @property
    def switch(self) -> StopSwitch:
        """The stop switch (its orders are the store's: every context's gates read the same ones)."""
        return self.contexts.default.service.switch

    async def halt(self, tool: str | None, *, by: str, reason: str = "") -> HaltOrder:
        """Halt ``tool`` (None: every tool), audited: nothing new of it is proposed, approved or executed, and runs
        pause at their next step that uses it."""
        return await self.switch.halt(tool, by=by, reason=reason)

    async def unhalt(self, tool: str | None, *, by: str) -> tuple[HaltOrder | None, int]:
        """Lift the halt of ``tool`` (None: the one of every tool), audited, and queue a resume for every run it
        paused. The order lifted (None: there was none) and how many runs were queued."""
        lifted = await self.switch.lift(tool, by=by)
        return lifted, (await self.resume_halted() if lifted is not None else 0)

    async def resume_halted(self, *, page: int = 500) -> int:
        """Queue a resume for every run the stop switch paused; one whose tool is still halted pauses again."""
        queued, after = 0, None
        while True:
            ids = await self.store.runs.paused(limit=page, after=after)
            for run_id in ids:
                found = await self.store.runs.load(run_id)
                reason = found.data.get("reason") if found is not None else None
                if found is not None and not _waiting_on(found.data) and str(reason).startswith(HALTED_PREFIX):
                    await self._queue(run_id, None, halted=True)
                    queued += 1
            if len(ids) < page:
                return queued
            after = ids[-1]

    async def watch_halts(self) -> None:
        """Resume what a lift released, whoever lifted it (a background round): when an order this process saw is
        gone, or at the first round with none in force (a lift made while no process ran)."""
        scopes = frozenset(o.scope for o in await self.switch.orders())
        before, self._halted = self._halted, scopes
        if (before is None and not scopes) or (before is not None and before - scopes):
            await self.resume_halted()

    async def _queue(
        self, session_id: str, approval_id: str | None, *, wake: bool = True, halted: bool = False
    ) -> None:
        now = self.contexts.clock.now()
        job = {"session_id": session_id, "approval_id": approval_id, **({"halted": True} if halted else {})}
        await self.store.jobs.enqueue(RESUME_JOB, job, now=now)
        if wake:
            self.work.set()

    async def process_jobs(self, *, limit: int = 20) -> int:
        """Run the queued resume jobs this worker can claim; a job is acknowledged only once it is finished."""
        now = self.contexts.clock.now()
        jobs = await self.store.jobs.claim(self.worker_id, kind=RESUME_JOB, limit=limit, now=now, lease=self.lease)
        for job in jobs:
            waiting = job.payload.get("approval_id")
            session = str(job.payload["session_id"])
            try:
                with about(session_id=session, approval_id=str(waiting) if waiting else None):
                    done = await self._continue(
                        session, str(waiting) if waiting else None, halted=bool(job.payload.get("halted"))
                    )
            except Exception:
                log.exception("resume job %s failed; it will be retried", job.id)
                done = False
            # An orphan's job is finished with either way: if the run is still orphaned, the next scan finds it
            # again (so a retry comes one round later, not one job lease later).
            if done or not waiting:
                await self.store.jobs.ack(job.id)
        return len(jobs)

    async def _continue(self, session_id: str, approval_id: str | None, *, halted: bool = False) -> bool:
        """True when the job is finished with (resumed, or nothing to do); False to retry it later.

        With an approval id: the run paused on it and it was decided. Without: the run's owner died mid-run, or
        (``halted``) the stop switch paused it and was lifted.
        """
        found = await self.store.runs.load(session_id)
        if found is None:
            return True
        state = RunState.of(found)
        if halted:
            if (
                state.status is not RunStatus.PAUSED
                or state.waiting_on()
                or not (state.reason or "").startswith(HALTED_PREFIX)
            ):
                return True  # resumed already
        elif approval_id is None and state.status is not RunStatus.RUNNING:
            return True  # taken over and moved on already
        if approval_id is not None and (approval_id not in state.waiting_on() or state.status is not RunStatus.PAUSED):
            return True  # resumed already (by the CLI or another worker)
        try:
            actor = "system:recovery" if approval_id is None else "system:resume"
            result = await self.resume(session_id, actor=actor, state=state)
        except EngineError as exc:
            if exc.code.retryable:
                return False
            log.warning("run %s could not continue: %s", session_id, exc.message)
            if self.reporter is not None and approval_id is not None:
                approval = await self.store.approvals.get(approval_id)
                await self.reporter.run_blocked(approval, f"The run could not continue: {exc.message}")
            return True
        shown = approval_id or (result.approval.id if result.approval else None)
        if self.reporter is not None and shown is not None:
            await self.reporter.run_continued(await self.store.approvals.get(shown), result)
        return True

    async def recover(self, *, page: int = 200) -> int:
        """Queue a resume for every run whose owner died (its checkpoint says ``running`` and its lease ran out:
        the worker died mid-step or between steps); returns how many were queued. A decided approval's resume
        needs no recovery: it is queued in the decision's own atomic step.

        Queuing twice is harmless: a run has one owner at a time and every save is compare-and-swap.
        """
        now = self.contexts.clock.now()
        queued = 0
        for run_id in await self.store.runs.orphaned(now=now, limit=page):
            await self._queue(run_id, None, wake=False)  # found by scanning: the next scan comes soon anyway
            queued += 1
        return queued

    # -- expiry -------------------------------------------------------------------------------------------
    async def expire_due(
        self, *, limit: int = 200, resume: Resume = "queue"
    ) -> list[tuple[Approval, RunResult | None]]:
        """Expire what is due (recorded as expiry, never as rejection) and apply each paused run's fallback."""
        expired = await self.contexts.default.service.expire_due(limit=limit)
        out: list[tuple[Approval, RunResult | None]] = []
        for a in expired:
            run = run_of(a)
            result: RunResult | None = None
            if run is not None and resume == "queue":
                await self._queue(run, a.id)
            elif run is not None and resume == "inline":
                found = await self.store.runs.load(run)
                if found is not None and a.id in _waiting_on(found.data):
                    result = await self.resume(run, force=True, actor="system:expiry", state=RunState.of(found))
            out.append((a, result))
        return out

    async def tick(self) -> None:
        """One round of background work: expire, recover what crashes left behind, resume what a lifted halt
        released, run queued resumes."""
        await self.expire_due()
        await self.recover()
        await self.watch_halts()
        await self.process_jobs()


def _waiting_on(checkpoint: dict[str, Any]) -> set[str]:
    """The approvals a stored checkpoint waits on (read without validating the whole run)."""
    waits = checkpoint.get("waits") or {}
    found = {str(v) for v in waits.values()} if isinstance(waits, dict) else set()
    return found | ({str(checkpoint["waiting"])} if checkpoint.get("waiting") else set())
