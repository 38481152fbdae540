"""The CLI's multi-step flows: decide then resume, auto-approve, the interactive prompt, expiry fallbacks.

Every decision goes through the engine's run lifecycle, exactly as a Slack click does; the CLI asks it to
resume the run inline so the command can print where the run stands.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hitl.api.models import ApprovalView
from hitl.cli.context import CliSettings
from hitl.cli.output import Out
from hitl.cli.remote import ApiClient
from hitl.engine.domain.edits import changes_text, edit_of
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status, Tier
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunResult, RunState, RunStatus
from hitl.engine.errors import EngineError, InvalidInput, NotFound

# The runtime's names, for the type checker: a flow runs on a runtime its command opened, so importing them here would
# load the runtime into a command that goes through the API (``remote_resume``) and opens none.
if TYPE_CHECKING:
    from hitl.engine.runtime.lifecycle import Decided
    from hitl.engine.runtime.process import Runtime
    from hitl.engine.workflow.definition import LoadedWorkflow

__all__ = [
    "LOCAL",
    "approval_view",
    "auto_approve",
    "decide_and_resume",
    "expire_and_apply",
    "interactive_loop",
    "locate",
    "refuse_claimed_in_production",
    "refuse_local_in_production",
    "remote_resume",
    "resolve_target",
]

LOCAL = "cli-local"
"""How a decision made straight against the store is recorded (not authenticated: ``--as`` names the reviewer)."""

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


async def _state(rt: Runtime, session_id: str) -> RunState | None:
    found = await rt.store.runs.load(session_id)
    return RunState.of(found) if found else None


async def locate(rt: Runtime, target: str) -> tuple[Approval | None, RunState | None]:
    """An approval id (and the run it pauses, if any), or a session id (and the approval it waits on, if any)."""
    if target.startswith("apr_"):
        approval = await rt.store.approvals.get(target)
        return approval, await _state(rt, approval.session_id) if approval.metadata.get("step") else None
    state = await _state(rt, target)
    if state is None:
        raise NotFound.run(target)
    return (await rt.store.approvals.get(state.waiting) if state.waiting else None), state


async def resolve_target(rt: Runtime, target: str) -> tuple[Approval, RunState | None]:
    """Like :func:`locate`, for commands that need an approval."""
    approval, state = await locate(rt, target)
    if approval is None:
        status = state.status if state else "unknown"
        raise NotFound(f"run {target} is not waiting on an approval (it is {status})", session_id=target)
    return approval, state


def _standing(d: Decided) -> RunResult:
    """Where things stand after a decision that did not continue a run."""
    a = d.approval
    if a.status is Status.PENDING:
        votes = f"{len(a.approvers)} of {a.quorum} approvals recorded"
        return RunResult(RunStatus.PAUSED, a.session_id, approval=a, reason=votes)
    return RunResult(_BY_APPROVAL[a.status], a.session_id, approval=a, reason=a.reason)


async def decide_and_resume(
    rt: Runtime,
    settings: CliSettings,
    target: str,
    kind: DecisionKind | None,
    *,
    reason: str | None,
    args: dict[str, Any] | None,
    force: bool,
    overrides: dict[str, Any] | None = None,
    replace_args: bool = False,
    confirm: dict[str, str] | None = None,
) -> RunResult:
    """``hitl resume``: decide (when a decision is given) and continue the run, every refusal checked before anything
    is recorded. A Modify's changes, field by field, are added to the result's history."""
    approval, state = await locate(rt, target)
    actor = settings.reviewer or "cli"
    # Every check that can refuse comes before anything is recorded: a refusal changes nothing.
    if overrides:
        if state is None:
            raise InvalidInput(f"{target} belongs to no run: --var applies to a run's variables")
        rt.lifecycle.check_overrides(state, overrides)
    if kind is not None:
        if approval is None:
            raise NotFound(f"run {target} is not waiting on an approval; resume it without a decision")
        await refuse_local_in_production(rt, approval, state=state)
        who = settings.require_reviewer()
        d = await rt.lifecycle.decide(
            DecideRequest(
                approval.id,
                who,
                kind,
                reason=reason,
                args=args,
                via=LOCAL,
                replace_args=replace_args,
                confirm=confirm,
            ),
            resume="none" if overrides else "inline",
            force=force,
            actor=actor,
            seen=approval,  # located once above: passed down, not read again
            state=state,
        )
        edit = edit_of(d.approval) if kind is DecisionKind.MODIFY else {}
        if d.run is not None or not overrides or state is None:
            result = d.run if d.run is not None else _standing(d)
            if edit:
                result = replace(result, history=(*result.history, f"changed by {who}: {changes_text(edit)}"))
            return result
    if state is None:
        assert approval is not None
        if overrides:
            raise InvalidInput(f"{target} belongs to no run: --var applies to a run's variables")
        from hitl.engine.runtime.lifecycle import Decided

        return _standing(Decided(approval))
    return await rt.lifecycle.resume(state.session_id, force=force, actor=actor, overrides=overrides, state=state)


async def refuse_local_in_production(
    rt: Runtime,
    approval: Approval | None = None,
    *,
    what: str = "",
    workflow: LoadedWorkflow | None = None,
    state: RunState | None = None,
) -> None:
    """``production: true``: a decision straight against the store (no token, any ``--as``) is refused. With
    ``workflow`` (before a run starts), that workflow's configuration is the one asked; ``state``: the checkpoint
    of the approval's run, as the caller read it."""
    if workflow is not None:
        context = rt.contexts.for_workflow(workflow)
    else:
        context = await rt.lifecycle.context_of(approval, state) if approval is not None else rt.contexts.default
    if context.config.production or rt.contexts.default.config.production:
        what = what or "a decision made against the store"
        await _audit_refusal(rt, f"{what} ({approval.id})" if approval is not None else what)
        raise InvalidInput(
            f"hitl.yaml says production: true, so {what} is refused: decide through the API (set HITL_API_URL and "
            "HITL_TOKEN; `hitl token new` makes a token) or in Slack"
        )


async def refuse_claimed_in_production(rt: Runtime, who: str, what: str) -> None:
    """``production: true``: an oversight command (halt, unhalt, practice, reviewers, trust) acting against the store
    by a claimed identity (``--as``, ``HITL_REVIEWER``) is refused and audited; through the API, the token says who
    is acting."""
    if not rt.contexts.default.config.production:
        return
    await _audit_refusal(rt, f"hitl {what} as {who}")
    raise InvalidInput(
        f"hitl.yaml says production: true, so `hitl {what}` against the store as a claimed {who} is refused: set "
        "HITL_API_URL and HITL_TOKEN (a token with the scope it needs) to do it through the API, or use /hitl in Slack"
    )


async def _audit_refusal(rt: Runtime, what: str) -> None:
    """A production refusal, as an audit entry: the actor is the unauthenticated CLI (a claimed identity is named in
    the detail, never taken as the actor)."""
    entry = AuditEntry(
        at=rt.clock.now(),
        actor="cli",
        event="refused",
        outcome="production",
        detail=f"{what}: refused, production: true needs an authenticated identity"[:500],
    )
    await rt.store.audit.append(entry)


async def remote_resume(
    client: ApiClient,
    out: Out,
    target: str,
    kind: DecisionKind | None,
    *,
    reason: str | None,
    args: dict[str, Any] | None,
    overrides: dict[str, Any],
    force: bool,
    replace_args: bool = False,
    confirm: dict[str, str] | None = None,
) -> int:
    """``hitl resume`` through the API: decide (authenticated by the token), then report where the run stands
    once ``hitl serve`` has continued it. Exit codes as for a local resume."""
    if kind is None:
        if target.startswith("apr_"):
            raise InvalidInput("resume an approval with a decision (--approve, --reject...), or name the session")
        run = await client.resume(target, overrides=overrides, force=force)
        out.remote_result(RunStatus(run.status), run.session_id, run.approval, run.reason or "")
        return RunStatus(run.status).exit_code
    decided = await client.decide(target, kind, reason=reason, args=args, replace_args=replace_args, confirm=confirm)
    if decided.changes and not out.json:
        edit = {k: (c.before, c.after) for k, c in decided.changes.items()}
        out.text(("  · ", "dim"), f"changed: {changes_text(edit)}")
    if overrides:
        run = await client.resume(decided.session_id, overrides=overrides, force=force)
    else:
        found = await client.run_after(decided.session_id, decided.id)
        if found is None:  # an agent's approval: the agent runs it, not the server
            out.agent_decision(decided)
            return _BY_APPROVAL[decided.status].exit_code
        run = found
    waiting = run.approval if run.approval is not None else decided
    out.remote_result(RunStatus(run.status), run.session_id, waiting, run.reason or "")
    return RunStatus(run.status).exit_code


async def auto_approve(rt: Runtime, result: RunResult, out: Out, *, escalations: bool) -> RunResult:
    """Approve every pause: for CI and tests only. Loud on stderr and recorded in the audit log."""
    if result.status is RunStatus.PAUSED:
        await refuse_local_in_production(rt, result.approval, what="--auto-approve")
    while result.status is RunStatus.PAUSED and result.approval is not None:
        a = result.approval
        if a.tier is Tier.ESCALATE and not escalations:
            out.warn(
                f"--auto-approve does not approve {a.id} ({a.tool}, escalate tier); "
                "pass --auto-approve-escalations to widen it, or decide it by hand"
            )
            return result
        if a.asks_attention:  # a value to type, a reason to give: a person's, never filled in for them
            out.warn(
                f"--auto-approve does not approve {a.id} ({a.tool}): approving it asks a person to "
                f"{_asked(a)}; decide it by hand (hitl resume {a.id} --approve --confirm ... --reason ...)"
            )
            return result
        out.warn(f"AUTO-APPROVING {a.id}: {a.tool} {json.dumps(a.args, ensure_ascii=False)[:200]}")
        await rt.store.audit.append(
            AuditEntry(
                at=rt.clock.now(),
                actor="cli:auto-approve",
                event="auto_approve",
                approval_id=a.id,
                version=a.version,
                action_hash=a.action_hash,
                detail=f"--auto-approve approved {a.tool} ({a.tier})",
            )
        )
        role = a.required_role or "auto-approve"
        decided: Decided | None = None
        for n in range(len(a.approvers), a.quorum):
            voter = Reviewer(id=f"cli:auto-approve#{n + 1}", roles=frozenset({role}))
            decided = await rt.lifecycle.decide(
                DecideRequest(a.id, voter, DecisionKind.APPROVE, via="auto-approve"),
                resume="inline",
                actor="cli:auto-approve",
            )
        if decided is not None and decided.run is not None:
            result = decided.run
        else:
            result = await rt.lifecycle.resume(result.session_id, actor="cli:auto-approve")
    return result


async def approval_view(rt: Runtime, a: Approval) -> ApprovalView:
    """``a`` as the API shows it, its one view drawn in the context its decisions are judged in (its run's
    hitl.yaml, else the default one): the view a decision naming it is checked against. A decision that ended a
    practice approval says so (to the decider alone)."""
    try:
        context = await rt.lifecycle.context_of(a)
    except EngineError:  # a run whose workflow cannot be composed now: drawn in the default context's words
        context = rt.contexts.default
    view = ApprovalView.of(a, context.config.present(a))
    return view.model_copy(update={"practice": practice_note(a)}) if is_practice(a) and not a.is_open else view


async def interactive_loop(rt: Runtime, settings: CliSettings, result: RunResult, out: Out) -> RunResult:
    """A prompt at each pause: approve, reject (reason), modify (JSON), evidence, defer."""
    from rich.markup import escape  # for people at a terminal: a scripted command never imports Rich
    from rich.prompt import Prompt

    if not sys.stdin.isatty():
        out.warn("--interactive needs a terminal; leaving the run paused")
        return result
    await refuse_local_in_production(rt, result.approval, what="--interactive")
    who = settings.reviewer or Prompt.ask("Reviewer id (e.g. U_SUPPORT1)")
    while result.status is RunStatus.PAUSED and result.approval is not None:
        a = result.approval
        shown = await approval_view(rt, a)  # the view the person decides on: its digest goes with the decision
        out.approval(shown)
        choice = Prompt.ask(
            escape("[a]pprove, [r]eject, [m]odify, [e]vidence, [d]efer"), choices=["a", "r", "m", "e", "d"], default="d"
        )
        if choice == "d":
            return result
        if choice == "e":
            out.text(("evidence (untrusted, redacted):\n", "bold"), a.evidence or "(none)")
            continue
        try:
            typed: dict[str, str] | None = None
            if choice == "a":
                kind, reason, edited = DecisionKind.APPROVE, None, None
                if a.confirm:
                    typed = {name: Prompt.ask(f"Type the {name} that runs, as you read it above") for name in a.confirm}
                if a.approve_reason_required:
                    reason = Prompt.ask("Why approve it?")
            elif choice == "r":
                kind, reason, edited = DecisionKind.REJECT, Prompt.ask("Reason"), None
            else:
                raw = Prompt.ask("Arguments as JSON", default=escape(json.dumps(a.execute_args, ensure_ascii=False)))
                kind, reason, edited = DecisionKind.MODIFY, None, json.loads(raw)
            d = await rt.lifecycle.decide(
                DecideRequest(
                    a.id,
                    who,
                    kind,
                    expected_version=a.version,
                    expected_hash=a.action_hash,
                    reason=reason,
                    args=edited,
                    via=LOCAL,
                    view_digest=shown.view_digest,
                    confirm=typed,
                ),
                resume="inline",
                actor=who,
            )
        except (EngineError, json.JSONDecodeError) as exc:
            out.error(str(getattr(exc, "code", "invalid_input")), getattr(exc, "message", str(exc)))
            continue
        if d.run is None:
            if d.approval.status is Status.PENDING:
                out.text(
                    f"{len(d.approval.approvers)} of {d.approval.quorum} approvals recorded; waiting for the others"
                )
            return _standing(d)
        result = d.run
    return result


async def expire_and_apply(rt: Runtime) -> list[tuple[str, str | None, str]]:
    """Expire what is due, then resume each affected run so its fallback applies."""
    results: list[tuple[str, str | None, str]] = []
    for a, run in await rt.lifecycle.expire_due(limit=1000, resume="inline"):
        if run is None:
            results.append((a.id, None, str(a.status)))
        else:
            results.append((a.id, run.session_id, str(run.status)))
    return results


def _asked(a: Approval) -> str:
    """What approving ``a`` asks of a person, in a few words."""
    parts = [f"type its {', '.join(a.confirm)}"] if a.confirm else []
    if a.approve_reason_required:
        parts.append("say why")
    return " and ".join(parts)
