"""The durable runner: drive a workflow step by step, pause for humans, resume without re-running.

After every step the run's state is checkpointed (compare-and-swap). A pause saves the run and returns
``paused`` with the approval; ``resume`` reloads the checkpoint and continues from the step it stopped at.
Effects go through :class:`~engine.runner.effects.Effects`, so each runs at most once, exactly once after
recovery, with the approved (possibly modified) arguments.
"""

from __future__ import annotations

from typing import Any

from engine.domain.ids import new_session_id
from engine.domain.models import Status
from engine.domain.records import AuditEntry
from engine.errors import EngineError, ErrorCode, InvalidInput, NotFound
from engine.runner.checks import check_templates, resolve_vars
from engine.runner.effects import EffectFailed
from engine.runner.outcomes import Halt, Jump, RunResult
from engine.runner.reviews import ReviewSteps
from engine.runner.spec import GateStep, LoadedWorkflow, ToolStep, describe_changes, load_workflow
from engine.runner.state import RunState, RunStatus
from engine.runner.templates import evaluate
from engine.runner.tools import Tool

__all__ = ["RunResult", "Runner"]


class Runner(ReviewSteps):
    """Runs workflows against an :class:`ApprovalService`.

    Args:
        service: policy + store + reviewers.
        worker_id: names this process in execution claims and the audit log.
        lease: seconds an execution claim stays valid without an outcome (recovery takes over after).
    """

    # -- entry points -----------------------------------------------------------------------------------
    async def start(
        self,
        wf: LoadedWorkflow,
        given_vars: dict[str, Any],
        *,
        session_id: str | None = None,
        requester: str | None = None,
        config_path: str | None = None,
    ) -> RunResult:
        """Validate everything that can be checked up front, then run until done or paused."""
        values = resolve_vars(wf, given_vars)
        if session_id is not None and await self.store.runs.load(session_id) is not None:
            raise InvalidInput(
                f"session {session_id} already has a run; continue it with `hitl resume {session_id}` "
                "or start a new one without --session",
                session_id=session_id,
            )
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
        )
        await self._save(state)
        return await self._drive(wf, tools, state)

    async def resume(self, session_id: str, *, force: bool = False, actor: str = "cli") -> RunResult:
        """Continue a paused (or crashed, or failed) run from its checkpoint."""
        state = await self.load(session_id)
        if state.status in (RunStatus.COMPLETED, RunStatus.REJECTED, RunStatus.CANCELLED, RunStatus.EXPIRED):
            return self._result(state)
        wf = load_workflow(state.workflow_path)
        if wf.spec_hash != state.spec_hash:
            what = describe_changes(state.step_hashes, wf.step_hashes)
            if not force:
                raise EngineError(
                    f"{state.workflow_path} changed since the run paused ({what}); "
                    "resume with --force to continue with the new file",
                    code=ErrorCode.WORKFLOW_CHANGED,
                    session_id=session_id,
                )
            await self.store.audit.append(
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
        return await self._drive(wf, self._load(wf), state)

    async def load(self, session_id: str) -> RunState:
        found = await self.store.runs.load(session_id)
        if found is None:
            raise NotFound(f"no run {session_id!r}; `hitl pending` lists paused runs", session_id=session_id)
        data, version = found
        return RunState.model_validate({**data, "version": version})

    # -- the loop ---------------------------------------------------------------------------------------
    async def _drive(self, wf: LoadedWorkflow, tools: dict[str, Tool], state: RunState) -> RunResult:
        steps = wf.spec.steps
        while state.position < len(steps):
            step = steps[state.position]
            try:
                if isinstance(step, GateStep):
                    outcome = await self._gate(wf, state, step)
                else:
                    outcome = await self._tool_step(wf, tools[step.tool], state, step)
            except EffectFailed as exc:
                outcome = Halt(RunStatus.FAILED, reason=str(exc))
            if isinstance(outcome, Halt):
                state.status = outcome.status
                state.waiting = outcome.approval.id if outcome.approval else None
                state.reason = outcome.reason
                await self._save(state)
                return self._result(state, outcome.approval)
            state.position = outcome.position if isinstance(outcome, Jump) else state.position + 1
            state.waiting = None
            if state.position >= len(steps):
                state.status, state.reason = RunStatus.COMPLETED, None
            await self._save(state)
        if state.status is not RunStatus.COMPLETED:  # a run resumed after it had already finished its steps
            state.status, state.reason = RunStatus.COMPLETED, None
            await self._save(state)
        return self._result(state)

    # -- tool steps -------------------------------------------------------------------------------------
    async def _tool_step(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Halt | Jump | None:
        if step.for_each:
            return await self._batch(wf, tool, state, step)
        if step.repeat:
            return await self._loop(wf, tool, state, step)
        it = state.iteration.get(step.id, 0)
        out = await self._gated(
            wf, tool, state, step, self._args(tool, state, step), key=f"{state.session_id}:{step.id}:{it}"
        )
        if isinstance(out, Halt):
            return out
        state.outputs[step.id] = out
        return None

    async def _batch(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> Halt | None:
        assert step.for_each is not None
        items = evaluate(step.for_each, self._scope(state, step.id), where=f"steps.{step.id}.for_each")
        if not isinstance(items, list | tuple):
            raise InvalidInput(f"steps.{step.id}.for_each must give a list, got {type(items).__name__}")
        all_args = [self._args(tool, state, step, **{step.as_: item}) for item in items]
        approval = await self._standing(tool.name, await self._propose(wf, state, step, tool.name, {}, batch=all_args))
        if isinstance(approval, Halt):
            return approval
        if approval is not None:
            await self.effects.mark(approval, Status.EXECUTING)
        it = state.iteration.get(step.id, 0)
        outputs = []
        for idx, args in enumerate(all_args):
            outputs.append(
                await self.effects.execute(tool, args, key=f"{state.session_id}:{step.id}:{it}:{idx}", approval=None)
            )
            state.history.append(f"{step.id}: item {idx + 1}/{len(all_args)} done")
        if approval is not None:
            await self.effects.mark(approval, Status.EXECUTED)
        state.outputs[step.id] = outputs
        return None
