"""The CLI's multi-step flows: decide then resume, auto-approve, the interactive prompt, expiry fallbacks."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.markup import escape
from rich.prompt import Prompt

from engine.cli.context import App, Settings, open_app
from engine.cli.output import Out
from engine.domain.models import Approval, DecisionKind, Reviewer, Status, Tier
from engine.domain.records import AuditEntry
from engine.errors import EngineError, ErrorCode, NotFound
from engine.runner.executor import RunResult
from engine.runner.spec import describe_changes, load_workflow
from engine.runner.state import RunState, RunStatus

__all__ = ["auto_approve", "decide_and_resume", "expire_and_apply", "interactive_loop", "resolve_target"]

_BY_APPROVAL = {
    Status.PENDING: RunStatus.PAUSED,
    Status.APPROVED: RunStatus.COMPLETED,
    Status.EXECUTING: RunStatus.COMPLETED,
    Status.EXECUTED: RunStatus.COMPLETED,
    Status.FAILED: RunStatus.FAILED,
    Status.REJECTED: RunStatus.REJECTED,
    Status.EXPIRED: RunStatus.EXPIRED,
    Status.CANCELLED: RunStatus.CANCELLED,
    Status.SUPERSEDED: RunStatus.PAUSED,
}


async def resolve_target(ctx: App, target: str) -> tuple[Approval, RunState | None]:
    """An approval id, or a session id whose run is waiting on an approval."""
    if target.startswith("apr_"):
        approval = await ctx.store.approvals.get(target)
        found = await ctx.store.runs.load(approval.session_id)
        return approval, (RunState.model_validate({**found[0], "version": found[1]}) if found else None)
    state = await ctx.runner.load(target)
    if state.waiting is None:
        raise NotFound(f"run {target} is not waiting on an approval (it is {state.status})", session_id=target)
    return await ctx.store.approvals.get(state.waiting), state


async def _locate(settings: Settings, target: str) -> tuple[Approval | None, RunState | None]:
    async with open_app(settings) as ctx:
        if target.startswith("apr_"):
            return await resolve_target(ctx, target)
        state = await ctx.runner.load(target)
        return (await ctx.store.approvals.get(state.waiting) if state.waiting else None), state


async def decide_and_resume(
    settings: Settings,
    target: str,
    kind: DecisionKind | None,
    *,
    reason: str | None,
    args: dict[str, Any] | None,
    force: bool,
    out: Out,
) -> RunResult:
    approval, state = await _locate(settings, target)
    wf = load_workflow(state.workflow_path) if state is not None else None
    if wf is not None and state is not None and wf.spec_hash != state.spec_hash and not force:
        # Refuse before deciding: a decision must not land on a run that cannot continue.
        what = describe_changes(state.step_hashes, wf.step_hashes)
        raise EngineError(
            f"{state.workflow_path} changed since the run paused ({what}); resume with --force to continue with it",
            code=ErrorCode.WORKFLOW_CHANGED,
        )
    async with open_app(settings, workflow=wf, recorded_config=state.config_path if state else None) as ctx:
        if kind is not None:
            if approval is None:
                raise NotFound(f"run {target} is not waiting on an approval; resume it without a decision")
            who = settings.require_reviewer()
            approval = await ctx.service.decide(approval.id, who, kind, reason=reason, args=args, via="cli")
            if approval.status is Status.PENDING:
                votes = f"{len(approval.approvers)} of {approval.quorum} approvals recorded"
                return RunResult(RunStatus.PAUSED, approval.session_id, approval=approval, reason=votes)
        if state is None:
            assert approval is not None
            return RunResult(
                _BY_APPROVAL[approval.status], approval.session_id, approval=approval, reason=approval.reason
            )
        return await ctx.runner.resume(state.session_id, force=force, actor=settings.reviewer or "cli")


async def auto_approve(ctx: App, result: RunResult, out: Out, *, escalations: bool) -> RunResult:
    """Approve every pause: for CI and tests only. Loud on stderr and recorded in the audit log."""
    while result.status is RunStatus.PAUSED and result.approval is not None:
        a = result.approval
        if a.tier is Tier.ESCALATE and not escalations:
            out.warn(
                f"--auto-approve does not approve {a.id} ({a.tool}, escalate tier); "
                "pass --auto-approve-escalations to widen it, or decide it by hand"
            )
            return result
        out.warn(f"AUTO-APPROVING {a.id}: {a.tool} {json.dumps(a.args, ensure_ascii=False)[:200]}")
        await ctx.store.audit.append(
            AuditEntry(
                at=ctx.service.clock.now(),
                actor="cli:auto-approve",
                event="auto_approve",
                approval_id=a.id,
                version=a.version,
                action_hash=a.action_hash,
                detail=f"--auto-approve approved {a.tool} ({a.tier})",
            )
        )
        role = a.required_role or "auto-approve"
        for n in range(len(a.approvers), a.quorum):
            bot = Reviewer(id=f"cli:auto-approve#{n + 1}", roles=frozenset({role}))
            a = await ctx.service.decide_as(bot, a.id, DecisionKind.APPROVE, via="auto-approve")
        result = await ctx.runner.resume(result.session_id, actor="cli:auto-approve")
    return result


async def interactive_loop(ctx: App, result: RunResult, out: Out) -> RunResult:
    """A prompt at each pause: approve, reject (reason), modify (JSON), evidence, defer."""
    if not sys.stdin.isatty():
        out.warn("--interactive needs a terminal; leaving the run paused")
        return result
    who = ctx.settings.reviewer or Prompt.ask("Reviewer id (e.g. U_SUPPORT1)")
    while result.status is RunStatus.PAUSED and result.approval is not None:
        a = result.approval
        out.approval(a)
        choice = Prompt.ask(
            escape("[a]pprove, [r]eject, [m]odify, [e]vidence, [d]efer"), choices=["a", "r", "m", "e", "d"], default="d"
        )
        try:
            if choice == "d":
                return result
            if choice == "e":
                out.text(("evidence (untrusted, redacted):\n", "bold"), a.evidence or "(none)")
                continue
            if choice == "a":
                a = await ctx.service.decide(a.id, who, DecisionKind.APPROVE, via="cli")
            elif choice == "r":
                reason = Prompt.ask("Reason")
                a = await ctx.service.decide(a.id, who, DecisionKind.REJECT, reason=reason, via="cli")
            else:
                raw = Prompt.ask("Arguments as JSON", default=escape(json.dumps(a.execute_args, ensure_ascii=False)))
                edited = json.loads(raw)
                a = await ctx.service.decide(a.id, who, DecisionKind.MODIFY, args=edited, via="cli")
        except (EngineError, json.JSONDecodeError) as exc:
            out.error(str(getattr(exc, "code", "invalid_input")), getattr(exc, "message", str(exc)))
            continue
        if a.status is Status.PENDING:
            out.text(f"{len(a.approvers)} of {a.quorum} approvals recorded; waiting for the others")
            return RunResult(RunStatus.PAUSED, a.session_id, approval=a)
        result = await ctx.runner.resume(result.session_id, actor=who)
    return result


async def expire_and_apply(settings: Settings) -> list[tuple[str, str | None, str]]:
    """Expire what is due, then resume each affected run so its fallback applies."""
    async with open_app(settings) as ctx:
        expired = await ctx.service.expire_due(limit=1000)
    results: list[tuple[str, str | None, str]] = []
    for a in expired:
        approval, state = await _locate(settings, a.id)
        if state is None or state.waiting != a.id:
            results.append((a.id, None, str(a.status)))
            continue
        wf = load_workflow(state.workflow_path)
        async with open_app(settings, workflow=wf, recorded_config=state.config_path) as ctx:
            r = await ctx.runner.resume(state.session_id, force=True, actor="system:expiry")
        results.append((a.id, state.session_id, str(r.status)))
    return results
