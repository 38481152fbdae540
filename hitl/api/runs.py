"""``/runs``: start a workflow registered by name under ``api.workflows`` (never a path from the request), resume
one (optionally with new variable values), and read where it stands."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.models import Approval
from hitl.engine.domain.runs import RunResult, RunState, RunStatus
from hitl.engine.errors import EngineError, ErrorCode, NotFound

from .context import CONTEXT, ApiContext, body_of, caller_of, may_see
from .models import ApprovalView
from .problems import ApiError, from_engine
from .routes import Endpoint
from .run_models import ResumeRequest, RunStartRequest, RunView
from .tokens import Caller

__all__ = ["routes"]


async def _view(ctx: ApiContext, result: RunResult, workflow: str | None) -> RunView:
    waiting = [result.approval] if result.approval is not None else []
    if result.status is RunStatus.PAUSED:  # the others its parallel steps wait on, from the checkpoint
        found = await ctx.lifecycle.store.runs.load(result.session_id)
        if found is not None:
            waiting = await _waiting(ctx, RunState.of(found))
    return RunView(
        session_id=result.session_id,
        status=str(result.status),
        workflow=workflow,
        position=None,
        approval=ApprovalView.of(result.approval, ctx.present(result.approval)) if result.approval else None,
        waiting=[ApprovalView.of(a, ctx.present(a)) for a in waiting],
        reason=result.reason,
    )


async def _waiting(ctx: ApiContext, state: RunState) -> list[Approval]:
    """The approvals ``state`` waits on, the one it names first first (one removed meanwhile is left out)."""
    ids = sorted(state.waiting_on(), key=lambda i: (i != state.waiting, i))
    out = []
    for approval_id in ids:
        try:
            out.append(await ctx.lifecycle.store.approvals.get(approval_id))
        except NotFound:
            continue
    return out


def _tools_seen(caller: Caller, tools: Iterable[str], *, doing: str) -> None:
    """403 ``tool_not_allowed`` unless the token sees every tool of the workflow: a token narrowed by ``tools:``
    proposes no other tool's call, through a run no more than through ``/proposals``."""
    unseen = sorted(t for t in tools if not caller.sees(t))
    if unseen:
        raise ApiError(
            403,
            "tool_not_allowed",
            f"this token may not {doing} a workflow that uses {', '.join(unseen)}: its tools are limited; "
            "use a token that may propose them",
        )


async def _may_resume(ctx: ApiContext, request: web.Request, caller: Caller, state: RunState) -> None:
    """403 ``not_eligible`` (audited here) unless the token is the run's own requester's (or an admin's): resuming
    with new values would ask the run's next steps in its requester's name, and a caller's word is not theirs."""
    if caller.reviewer != state.requester and not caller.may(Scope.ADMIN):
        refusal = ApiError(
            403,
            str(ErrorCode.NOT_ELIGIBLE),
            f"run {state.session_id} was started by another identity: only a token of the identity that started it, "
            "or an admin token, may resume it; nothing was changed",
        )
        await ctx.refused(request, refusal)  # a code the engine audits elsewhere: audited here, once
        raise refusal


async def start(request: web.Request) -> web.Response:
    """Start a workflow registered under api.workflows."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.RUN)
    body = await body_of(request, RunStartRequest)
    config, _ = ctx.config.current()
    base = ctx.config.path.parent if ctx.config.path is not None else Path.cwd()
    try:
        workflow = ctx.lifecycle.contexts.workflows.load(config.api.workflow_file(body.workflow, base))
        _tools_seen(caller, workflow.spec.tools, doing="start")
        result = await ctx.lifecycle.start(
            workflow, body.vars, session_id=body.session_id, requester=caller.reviewer, on_behalf_of=caller.acts_for
        )
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response((await _view(ctx, result, workflow.spec.name)).model_dump(mode="json"), status=201)


async def _state(ctx: ApiContext, session_id: str) -> RunState:
    found = await ctx.lifecycle.store.runs.load(session_id)
    if found is None:
        raise ApiError(404, str(ErrorCode.NOT_FOUND), f"no run {session_id!r}")
    return RunState.of(found)


async def status(request: web.Request) -> web.Response:
    """Where a run stands, with the approvals it waits on that the token may read (as ``GET /approvals`` lists
    them: one it may not, of another tool or outside its roles, is left out)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    state = await _state(ctx, request.match_info["id"])
    now = ctx.lifecycle.contexts.clock.now()
    seen = [a for a in await _waiting(ctx, state) if may_see(caller, a, now=now)]
    waiting = [ApprovalView.of(a, ctx.present(a)) for a in seen]
    view = RunView(
        session_id=state.session_id,
        status=str(state.status),
        workflow=state.workflow,
        position=state.position,
        approval=waiting[0] if waiting else None,
        waiting=waiting,
        reason=state.reason,
    )
    return web.json_response(view.model_dump(mode="json"))


async def resume(request: web.Request) -> web.Response:
    """Resume a run (optionally with new variable values)."""
    ctx = request.app[CONTEXT]
    caller: Caller = caller_of(request, Scope.RUN)
    body = await body_of(request, ResumeRequest)
    state = await _state(ctx, request.match_info["id"])
    await _may_resume(ctx, request, caller, state)
    try:
        context = ctx.lifecycle.contexts.for_state(state)
        if context.workflow is not None:
            _tools_seen(caller, context.workflow.spec.tools, doing="resume")
        result = await ctx.lifecycle.resume(
            state.session_id, force=body.force, actor=caller.via, overrides=body.vars, state=state
        )
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response((await _view(ctx, result, state.workflow)).model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The run endpoints (workflows registered under ``api.workflows``)."""
    return [
        Endpoint("POST", "/runs", start, RunView, (403, 404, 409), body=RunStartRequest, status=201),
        Endpoint("GET", "/runs/{id}", status, RunView, (403, 404)),
        Endpoint("POST", "/runs/{id}/resume", resume, RunView, (403, 404, 409), body=ResumeRequest),
    ]
