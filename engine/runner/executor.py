"""The durable runner: drive a workflow step by step, pause for humans, resume without re-running.

After every step the run's state is checkpointed (compare-and-swap). A pause saves the run and returns
``paused`` with the approval; ``resume`` reloads the checkpoint and continues from the step it stopped at.
Effects go through :class:`~hitl.engine.execution.effects.Effects`, so each runs at most once, exactly once after
recovery, with the approved (possibly modified) arguments.
"""

from __future__ import annotations

import logging
from typing import Any

from hitl.engine.config.api import EventKind
from hitl.engine.domain.ids import new_session_id
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.runs import RunResult, RunState, RunStatus
from hitl.engine.errors import EngineError, IllegalTransition, InvalidInput, NotFound, StaleVersion
from hitl.engine.execution.run_lease import RunLease
from hitl.engine.execution.tools import Tool, load_tools
from hitl.engine.process.log_context import about
from hitl.engine.runner.agent_backend import AgentBackend
from hitl.engine.runner.checks import changed_since_paused, check_templates, resolve_vars, vars_after
from hitl.engine.runner.dispatch import StepRunner
from hitl.engine.runner.outcomes import Stop
from hitl.engine.runner.patterns import Patterns
from hitl.engine.runner.step_context import StepContext
from hitl.engine.service import ApprovalService
from hitl.engine.workflow.definition import LoadedWorkflow, WorkflowFiles

__all__ = ["RunResult", "Runner"]

log = logging.getLogger(__name__)


class Runner:
    """Runs workflows against an :class:`ApprovalService`.

    Args:
        service: policy + store + reviewers (of the run's context: hitl.yaml with the workflow's tool policies).
        worker_id: names this process as run owner and claim holder, and in the audit log (unique per process).
        lease: seconds a run's ownership and an effect's claim stay valid unrenewed (renewed while working), so a
            worker that dies is taken over within one lease.
        agents: runs agent steps (default: the ``strands`` backend, loaded when a workflow first needs it).
        workflows: the workflow files its runtime read, for a resume not handed its workflow (default: its own).
    """

    def __init__(
        self,
        service: ApprovalService,
        *,
        worker_id: str | None = None,
        lease: float = 6.0,
        agents: AgentBackend | None = None,
        workflows: WorkflowFiles | None = None,
    ) -> None:
        self.context = StepContext(service, worker_id=worker_id, lease=lease)
        self.svc = service
        self.store = service.store
        self.worker_id = self.context.worker_id
        self.patterns = Patterns(self.context, StepRunner(self.context, agents))
        self._tools: dict[str, dict[str, Tool]] = {}
        self._checked: set[str] = set()
        # A resume reads its run's workflow file: by its stat when unchanged, so a resume does not parse YAML.
        self._workflows = workflows if workflows is not None else WorkflowFiles()

    # -- entry points -----------------------------------------------------------------------------------
    async def start(
        self,
        wf: LoadedWorkflow,
        given_vars: dict[str, Any],
        *,
        session_id: str | None = None,
        requester: str | None = None,
        config_path: str | None = None,
        on_behalf_of: str | None = None,
    ) -> RunResult:
        """Validate everything that can be checked up front, then run until done or paused. ``on_behalf_of``: the
        person the run acts for, from a trusted source only (:attr:`RunState.on_behalf_of`)."""
        values = resolve_vars(wf, given_vars)
        if wf.spec_hash not in self._checked:
            check_templates(wf)
            self._checked.add(wf.spec_hash)
        tools = self._load(wf)
        state = RunState(
            session_id=session_id or new_session_id(),
            workflow=wf.spec.name,
            workflow_path=str(wf.path),
            config_path=config_path,
            spec_hash=wf.spec_hash,
            step_hashes=wf.step_hashes,
            vars=values,
            requester=requester or self.svc.requester,
            on_behalf_of=on_behalf_of,
        )
        run_lease = self.context.begin(state)
        # A session named here is new: no grant can exist for it. One the caller named may have some.
        run_lease.trusted = frozenset() if session_id is None else None
        try:
            with about(session_id=state.session_id):
                return await self._start(wf, tools, run_lease)
        except StaleVersion:
            if run_lease.committed:
                raise
            # The run's first commit creates it: refused because the session already has a run.
            raise InvalidInput(
                f"session {state.session_id} already has a run; continue it with `hitl resume {state.session_id}` "
                "or start a new one without --session",
                session_id=state.session_id,
            ) from None

    async def _start(self, wf: LoadedWorkflow, tools: dict[str, Tool], run_lease: RunLease) -> RunResult:
        async with self.context.driving(run_lease):
            state = run_lease.state
            self.context.event(state, "run_started", f"{wf.spec.name} by {state.requester}")
            return await self._drive(wf, tools, state)

    async def resume(
        self,
        session_id: str,
        *,
        force: bool = False,
        actor: str = "cli",
        overrides: dict[str, Any] | None = None,
        workflow: LoadedWorkflow | None = None,
    ) -> RunResult:
        """Continue a paused (or crashed, or failed) run from its checkpoint, as its owner. ``overrides`` replace
        variables for the steps still to come (validated like ``--var`` at the start; recorded in the audit).
        ``workflow``: the run's workflow file as the caller read it (read here when not given)."""
        with about(session_id=session_id):
            async with self.context.driving(await self.context.open(session_id)) as run_lease:
                state = run_lease.state
                wf = workflow if workflow is not None else self._workflows.load(state.workflow_path)
                return await self._resume(state, wf, force=force, actor=actor, overrides=overrides or {})

    async def _resume(
        self, state: RunState, wf: LoadedWorkflow, *, force: bool, actor: str, overrides: dict[str, Any]
    ) -> RunResult:
        if state.status.ended and not overrides:
            return self._result(state)
        if overrides:
            state.vars = vars_after(state, wf, overrides)
            names = ", ".join(sorted(overrides))
            state.history.append(f"variables changed by {actor}: {names}")
            self.context.event(state, "run_vars_changed", f"by {actor}: {names}")
        changed = changed_since_paused(state, wf)
        if changed is not None:
            what, refusal = changed
            if not force:
                raise refusal
            self.context.run_lease(state).events.append(
                AuditEntry(
                    at=self.svc.clock.now(),
                    actor=actor,
                    event="forced_resume",
                    detail=f"{state.session_id}: workflow changed ({what})"[:500],
                )
            )
            state.history.append(f"resumed with --force by {actor}: {what}")
            state.spec_hash, state.step_hashes = wf.spec_hash, wf.step_hashes
        state.status = RunStatus.RUNNING
        await self.context.save(state)
        self.context.event(state, "run_resumed", f"by {actor} at step {state.position + 1}")
        return await self._drive(wf, self._load(wf), state)

    async def load(self, session_id: str) -> RunState:
        found = await self.store.runs.load(session_id)
        if found is None:
            raise NotFound.run(session_id)
        return RunState.of(found)

    # -- the loop ---------------------------------------------------------------------------------------
    async def _drive(self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState) -> RunResult:
        while True:
            try:
                outcome = await self.patterns.run(wf, tools, state)
            except EngineError as exc:
                if not exc.code.retryable:
                    # It would fail the same way on every retry: stop here, saying why, rather than leave a
                    # running run for recovery to pick up again and again. A retryable error (the store blinked,
                    # an effect is held elsewhere) leaves it running: the next owner tries again.
                    state.status, state.reason, state.waiting = RunStatus.FAILED, exc.message, None
                    leftover = self._leftover(state, Stop(RunStatus.FAILED))
                    await self.context.save(state)
                    await self.context.run_lease(state).commit(release=True)
                    await self._close_leftover(state, leftover)
                    await self._finished(state)
                raise
            if outcome is None:
                break
            halted = await self._halt(state, outcome)
            if halted is not None:
                return halted
            # the approval it would pause on was asked and answered before: go on with it
        state.status, state.reason, state.waiting = RunStatus.COMPLETED, None, None
        await self.context.save(state)
        self.context.event(state, "run_completed", f"{len(wf.by_id)} steps")
        await self.context.run_lease(state).commit(release=True)
        await self._finished(state)
        return self._result(state)

    async def _halt(self, state: RunState, halt: Stop) -> RunResult | None:
        """Pause or end the run in one commit (storing the approval it pauses on, if it is new). None when that
        approval turns out to have been answered already: then nothing was written and the step runs again."""
        run_lease = self.context.run_lease(state)
        approval = halt.approval
        ask = run_lease.asks.pop(approval.id, None) if approval is not None else None
        before = (state.status, state.waiting, state.reason, len(run_lease.events), dict(state.waits))
        state.status, state.waiting, state.reason = halt.status, approval.id if approval else None, halt.reason
        leftover = self._leftover(state, halt)
        await self.context.save(state)
        waiting = f" on {approval.id}" if approval else ""
        self.context.event(state, f"run_{halt.status}", f"{halt.reason or ''}{waiting}".strip())
        done = await run_lease.commit(ask=ask, release=True)
        if not done.applied:
            run_lease.asks.clear()
            state.status, state.waiting, state.reason, state.waits = before[0], before[1], before[2], before[4]
            del run_lease.events[before[3] :]
            assert done.approval is not None
            run_lease.answered[done.approval.id] = done.approval
            return None
        if ask is not None and done.approval is not None:
            approval = done.approval
            if done.created:
                await self.svc.announce(approval)
        if halt.status is not RunStatus.PAUSED:
            await self._close_leftover(state, leftover)
            await self._finished(state)
        return self._result(state, approval)

    @staticmethod
    def _leftover(state: RunState, halt: Stop) -> list[str]:
        """A run that ends while other steps wait (a branch rejected, another branch paused): the approvals those
        steps wait on, which nobody needs any more. The checkpoint stops naming them."""
        if halt.status is RunStatus.PAUSED:
            return []
        ended_on = halt.approval.id if halt.approval else None
        leftover = [a for a in state.waits.values() if a != ended_on]
        state.waits = {}
        return leftover

    async def _close_leftover(self, state: RunState, leftover: list[str]) -> None:
        """Cancel them (audited; their cards say so), so no reviewer decides what can no longer run. One decided
        meanwhile keeps its decision; one that stays open by a crash here is harmless: its run has ended."""
        for approval_id in leftover:
            try:
                await self.svc.cancel(
                    approval_id, actor=self.worker_id, reason=f"the run ended ({state.status}) before this was decided"
                )
            except (IllegalTransition, StaleVersion):
                continue

    async def _finished(self, state: RunState) -> None:
        """Tell webhook subscribers the run ended (completed, rejected, cancelled, expired or failed)."""
        if self.svc.events is None:
            return
        run = {"session_id": state.session_id, "workflow": state.workflow, "status": str(state.status)}
        try:
            await self.svc.events.emit(
                EventKind.RUN_FINISHED, f"run.finished:{state.session_id}", {"run": {**run, "reason": state.reason}}
            )
        except Exception:  # the run's end is recorded; a lost notice must not turn it into a failure
            log.exception("could not queue run.finished for %s", state.session_id)

    def _load(self, wf: LoadedWorkflow) -> dict[str, Tool]:
        key = wf.spec_hash
        if key not in self._tools:
            self._tools[key] = load_tools(wf.spec.tools, base=wf.path.parent)
        return self._tools[key]

    def _result(self, state: RunState, approval: Any = None) -> RunResult:
        return RunResult(
            status=state.status,
            session_id=state.session_id,
            approval=approval,
            reason=state.reason,
            outputs=dict(state.outputs),
            history=tuple(state.history),
        )
