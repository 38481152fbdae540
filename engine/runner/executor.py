"""The durable runner: drive a workflow step by step, pause for humans, resume without re-running.

After every step the run's state is checkpointed (compare-and-swap). A pause saves the run and returns
``paused`` with the approval; ``resume`` reloads the checkpoint and continues from the step it stopped at.
Effects go through :class:`~engine.runner.effects.Effects`, so each runs at most once, exactly once after
recovery, with the approved (possibly modified) arguments.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any

from engine.domain.hashing import action_hash, batch_hash
from engine.domain.ids import new_session_id, short_id
from engine.domain.models import Approval, DecisionKind, Status, Tier
from engine.domain.records import AuditEntry
from engine.errors import EngineError, ErrorCode, InvalidInput, NotFound
from engine.runner.checks import check_templates, resolve_vars
from engine.runner.effects import EffectFailed, Effects
from engine.runner.spec import GateStep, LoadedWorkflow, ToolStep, describe_changes, load_workflow
from engine.runner.state import RunState, RunStatus
from engine.runner.templates import evaluate, render_value
from engine.runner.tools import Tool, load_tools
from engine.service import ApprovalService, Proposal

__all__ = ["RunResult", "Runner"]


@dataclass(frozen=True)
class RunResult:
    """Where a run stands after ``start`` or ``resume``."""

    status: RunStatus
    session_id: str
    approval: Approval | None = None
    reason: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return self.status.exit_code


@dataclass(frozen=True)
class _Halt:
    status: RunStatus
    approval: Approval | None = None
    reason: str | None = None


@dataclass(frozen=True)
class _Jump:
    position: int


class Runner:
    """Runs workflows against an :class:`ApprovalService`.

    Args:
        service: policy + store + reviewers.
        worker_id: names this process in execution claims and the audit log.
        lease: seconds an execution claim stays valid without an outcome (recovery takes over after).
    """

    def __init__(self, service: ApprovalService, *, worker_id: str | None = None, lease: float = 300.0) -> None:
        self.svc = service
        self.store = service.store
        self.worker_id = worker_id or f"runner:{socket.gethostname()}:{short_id('w')}"
        self.effects = Effects(service.store, service.clock, self.worker_id, lease)
        self._tools: dict[str, dict[str, Tool]] = {}
        self._checked: set[str] = set()

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
            await self.store.append_audit(
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
        found = await self.store.load_checkpoint(session_id)
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
                outcome = _Halt(RunStatus.FAILED, reason=str(exc))
            if isinstance(outcome, _Halt):
                state.status = outcome.status
                state.waiting = outcome.approval.id if outcome.approval else None
                state.reason = outcome.reason
                await self._save(state)
                return self._result(state, outcome.approval)
            state.position = outcome.position if isinstance(outcome, _Jump) else state.position + 1
            state.waiting = None
            if state.position >= len(steps):
                state.status, state.reason = RunStatus.COMPLETED, None
            await self._save(state)
        if state.status is not RunStatus.COMPLETED:  # a run resumed after it had already finished its steps
            state.status, state.reason = RunStatus.COMPLETED, None
            await self._save(state)
        return self._result(state)

    def _scope(self, state: RunState, step_id: str, **extra: Any) -> dict[str, Any]:
        return {
            "vars": state.vars,
            "steps": {k: {"output": v} for k, v in state.outputs.items()},
            "feedback": state.feedback.get(step_id, ""),
            "iteration": state.iteration.get(step_id, 0),
            **extra,
        }

    # -- tool steps -------------------------------------------------------------------------------------
    async def _tool_step(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> _Halt | _Jump | None:
        if step.for_each:
            return await self._batch(wf, tool, state, step)
        if step.repeat:
            return await self._loop(wf, tool, state, step)
        it = state.iteration.get(step.id, 0)
        out = await self._gated(
            wf, tool, state, step, self._args(tool, state, step), key=f"{state.session_id}:{step.id}:{it}"
        )
        if isinstance(out, _Halt):
            return out
        state.outputs[step.id] = out
        return None

    def _args(self, tool: Tool, state: RunState, step: ToolStep, **extra: Any) -> dict[str, Any]:
        rendered = render_value(step.args, self._scope(state, step.id, **extra), where=f"steps.{step.id}.args")
        return tool.schema.validate(rendered)

    async def _propose(
        self, wf: LoadedWorkflow, state: RunState, step: ToolStep, tool: str, args: dict[str, Any], **kw: Any
    ) -> Any:
        it = state.iteration.get(step.id, 0)
        digest = (
            batch_hash([(tool, a) for a in kw["batch"]]) if kw.get("batch") is not None else action_hash(tool, args)
        )
        evidence = str(render_value(step.evidence, self._scope(state, step.id), where=f"steps.{step.id}.evidence"))
        return await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            evidence=evidence,
            preview=json.dumps(args, ensure_ascii=False, indent=1)[:2000] if not kw.get("batch") else "",
            min_tier=Tier.APPROVE if step.approval == "required" else Tier.AUTO,
            dedupe_key=f"{state.session_id}:{step.id}:{it}:{digest}",
            metadata={"step": step.id, "workflow": wf.spec.name, "kind": "tool"},
            timeout=step.timeout,
            **kw,
        )

    async def _gated(
        self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep, args: dict[str, Any], *, key: str
    ) -> Any:
        verdict = await self._standing(tool.name, await self._propose(wf, state, step, tool.name, args))
        if isinstance(verdict, _Halt):
            return verdict
        return await self.effects.execute(tool, verdict.execute_args if verdict else args, key=key, approval=verdict)

    async def _standing(self, tool: str, prop: Proposal) -> Approval | _Halt | None:
        """What a proposal means for the run: halt (denied, pending, rejected...), go with an approval, or go."""
        if prop.verdict.denied:
            return _Halt(RunStatus.REJECTED, reason=f"{tool} is denied by policy; nothing ran")
        if prop.approval is None:
            return None
        approval = await self.effects.follow(prop.approval)
        return _halt_for(approval) or approval

    async def _batch(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> _Halt | None:
        assert step.for_each is not None
        items = evaluate(step.for_each, self._scope(state, step.id), where=f"steps.{step.id}.for_each")
        if not isinstance(items, list | tuple):
            raise InvalidInput(f"steps.{step.id}.for_each must give a list, got {type(items).__name__}")
        all_args = [self._args(tool, state, step, **{step.as_: item}) for item in items]
        approval = await self._standing(tool.name, await self._propose(wf, state, step, tool.name, {}, batch=all_args))
        if isinstance(approval, _Halt):
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

    async def _loop(self, wf: LoadedWorkflow, tool: Tool, state: RunState, step: ToolStep) -> _Halt | None:
        spec = step.repeat
        assert spec is not None
        while True:
            it = state.iteration.get(step.id, 0)
            due = spec.review_after and it and (it % spec.review_after == 0 or it >= spec.max)
            if due and state.iteration.get(f"{step.id}@reviewed") != it:
                verdict = await self._review(wf, state, step, it)
                if verdict is not None:
                    return verdict if isinstance(verdict, _Halt) else None
                state.iteration[f"{step.id}@reviewed"] = it
            out = await self._gated(
                wf, tool, state, step, self._args(tool, state, step), key=f"{state.session_id}:{step.id}:{it}"
            )
            if isinstance(out, _Halt):
                return out
            state.outputs[step.id] = out
            if evaluate(spec.until, self._scope(state, step.id), where=f"steps.{step.id}.repeat.until"):
                return None
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: iteration {it + 1} did not meet '{spec.until}'")
            await self._save(state)
            if it + 1 >= spec.max and not spec.review_after:
                return _Halt(RunStatus.FAILED, reason=f"{step.id} did not meet '{spec.until}' in {spec.max} iterations")

    async def _review(self, wf: LoadedWorkflow, state: RunState, step: ToolStep, it: int) -> _Halt | _Jump | None:
        """A reviewer looks at a quality loop: approve the current output, continue, feedback, or reject."""
        preview = json.dumps(state.outputs.get(step.id), ensure_ascii=False, default=str)[:1500]
        a = await self._gate_approval(
            state,
            f"review:{step.id}",
            step.id,
            it,
            "Accept the current output?",
            preview,
            role=None,
            timeout=step.timeout,
            fallback="cancel",
        )
        if a.status is Status.APPROVED:
            return _Jump(state.position + 1)
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            state.feedback[step.id] = a.reason or ""
            return None
        return _halt_for(a) or _Halt(RunStatus.REJECTED, approval=a, reason=a.reason)

    # -- review gates -----------------------------------------------------------------------------------
    async def _gate(self, wf: LoadedWorkflow, state: RunState, step: GateStep) -> _Halt | _Jump | None:
        scope = self._scope(state, step.id)
        if step.condition and not evaluate(step.condition, scope, where=f"steps.{step.id}.condition"):
            state.outputs[step.id] = {"skipped": True}
            return None
        prompt = str(render_value(step.prompt, scope, where=f"steps.{step.id}.prompt"))
        preview = str(render_value(step.preview, scope, where=f"steps.{step.id}.preview"))[: step.preview_length]
        it = state.iteration.get(step.id, 0)
        a = await self._gate_approval(
            state,
            f"gate:{step.id}",
            step.id,
            it,
            prompt,
            preview,
            role=step.role,
            timeout=step.timeout,
            fallback=step.fallback,
        )
        if a.status is Status.APPROVED:
            state.outputs[step.id] = {"approved_by": list(a.approvers)}
            return None
        if a.status is Status.EXPIRED and step.fallback == "continue":
            state.outputs[step.id] = {"expired": True}
            state.history.append(f"{step.id}: expired; fallback continue")
            return None
        if a.status is Status.REJECTED and a.decisions and a.decisions[-1].kind is DecisionKind.FEEDBACK:
            prev = _previous_tool_step(wf, state.position)
            if prev is None:
                return _Halt(RunStatus.REJECTED, approval=a, reason="feedback given, but no earlier step to re-run")
            target = wf.spec.steps[prev]
            state.feedback[target.id] = a.reason or ""
            state.iteration[target.id] = state.iteration.get(target.id, 0) + 1
            state.iteration[step.id] = it + 1
            state.history.append(f"{step.id}: feedback from {a.decisions[-1].reviewer}; re-running {target.id}")
            return _Jump(prev)
        return _halt_for(a) or _Halt(RunStatus.REJECTED, approval=a, reason=a.reason)

    async def _gate_approval(
        self,
        state: RunState,
        tool: str,
        step_id: str,
        it: int,
        prompt: str,
        preview: str,
        *,
        role: str | None,
        timeout: float | None,
        fallback: str,
    ) -> Approval:
        args = {"prompt": prompt, "preview": preview}
        prop = await self.svc.propose(
            tool,
            args,
            session_id=state.session_id,
            requester=state.requester,
            preview=preview,
            min_tier=Tier.APPROVE,
            dedupe_key=f"{state.session_id}:{tool}:{it}:{action_hash(tool, args)}",
            metadata={"step": step_id, "workflow": state.workflow, "kind": "gate", "fallback": fallback},
            timeout=timeout,
            role=role,
        )
        if prop.approval is None:
            raise EngineError(
                f"{tool}: the policy denies review gates here; allow it or remove the gate",
                code=ErrorCode.POLICY_DENIED,
            )
        return prop.approval

    # -- persistence ------------------------------------------------------------------------------------
    async def _save(self, state: RunState) -> None:
        data = state.model_dump(mode="json", exclude={"version"})
        state.version = await self.store.save_checkpoint(
            state.session_id, data, expected_version=state.version, now=self.svc.clock.now()
        )

    def _load(self, wf: LoadedWorkflow) -> dict[str, Tool]:
        key = wf.spec_hash
        if key not in self._tools:
            self._tools[key] = load_tools(wf.spec.tools, base=wf.path.parent)
        return self._tools[key]

    def _result(self, state: RunState, approval: Approval | None = None) -> RunResult:
        return RunResult(
            status=state.status,
            session_id=state.session_id,
            approval=approval,
            reason=state.reason,
            outputs=dict(state.outputs),
            history=tuple(state.history),
        )


def _halt_for(a: Approval) -> _Halt | None:
    match a.status:
        case Status.PENDING:
            return _Halt(RunStatus.PAUSED, approval=a)
        case Status.REJECTED:
            return _Halt(RunStatus.REJECTED, approval=a, reason=a.reason or "rejected")
        case Status.EXPIRED:
            return _Halt(RunStatus.EXPIRED, approval=a, reason="the approval expired without a decision")
        case Status.CANCELLED:
            return _Halt(RunStatus.CANCELLED, approval=a, reason=a.reason or "cancelled")
        case _:
            return None


def _previous_tool_step(wf: LoadedWorkflow, position: int) -> int | None:
    for i in range(position - 1, -1, -1):
        if isinstance(wf.spec.steps[i], ToolStep):
            return i
    return None
