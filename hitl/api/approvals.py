"""``/approvals``: list, read, decide and wait. A decision goes through the same lifecycle call a Slack click does
(same eligibility, quorum, binding, audit), recorded with the channel ``api:<token name>``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer, Status
from hitl.engine.domain.practice import is_practice, practice_note
from hitl.engine.domain.questions import ASK_PERSON
from hitl.engine.domain.ranking import why_ranked
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, NotFound
from hitl.engine.storage.queue import queue_page

from .context import CONTEXT, ApiContext, body_of, caller_of, may_see, query_of
from .models import (
    ApprovalList,
    ApprovalView,
    AuditList,
    AuditQuery,
    AuditView,
    DecisionRequest,
    ListQuery,
    WaitQuery,
)
from .problems import ApiError, from_engine
from .routes import Endpoint
from .tokens import Caller

__all__ = ["routes"]


def _json(model: ApprovalView | ApprovalList, status: int = 200) -> web.Response:
    return web.json_response(model.model_dump(mode="json"), status=status)


async def list_approvals(request: web.Request) -> web.Response:
    """Approvals, paged: pending most important first (default; ``order=age``: oldest first), or by status newest
    first, each with can_decide; a pending list says how many wait on the caller."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    q = query_of(request, ListQuery)
    approvals = ctx.lifecycle.store.approvals
    now = ctx.lifecycle.contexts.clock.now()
    ranked = q.status == Status.PENDING and q.order == "rank"
    waiting: int | None = None
    if q.status == Status.PENDING:
        roles = [q.role] if q.role else None
        if ranked:  # as a person meets it now: every one due soon first, wherever the rank puts it
            page = await queue_page(approvals, now=now, roles=roles, limit=q.limit, cursor=q.cursor)
        else:
            page = await approvals.list_pending(roles=roles, limit=q.limit, cursor=q.cursor, order=q.order, now=now)
        waiting = await ctx.waiting_on(caller)
    else:
        status = None if q.status == "any" else Status(q.status)
        page = await approvals.list_recent(status=status, limit=q.limit, cursor=q.cursor)
    items: list[ApprovalView] = []
    reviewers: dict[str | None, Reviewer] = {}
    # A pending page in rank order reads as a person meets it now: one about to expire first (why_ranked says so).
    for a in page.items:
        if not may_see(caller, a, now=now) or (q.tool and a.tool != q.tool):
            continue
        if q.session and a.session_id != q.session:
            continue
        if q.role and q.status != Status.PENDING and a.required_role not in (q.role, None):
            continue
        can = await ctx.can_decide(caller, a, reviewers)
        if q.decidable and not can:
            continue
        shown = {"can_decide": can, **({"ranked": why_ranked(a, now=now)} if ranked else {})}
        items.append(ApprovalView.of(a, ctx.present(a)).model_copy(update=shown))
    return _json(ApprovalList(items=items, cursor=page.cursor, waiting=waiting))


async def get_approval(request: web.Request) -> web.Response:
    """One approval with its audit trail."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    approval = await ctx.visible(caller, request.match_info["id"])
    trail = await ctx.lifecycle.store.audit.entries(approval_id=approval.id)
    view = ApprovalView.of(approval, ctx.present(approval)).model_copy(
        update={"can_decide": await ctx.can_decide(caller, approval), "audit": [AuditView.of(e) for e in trail]}
    )
    return _json(view)


async def decide(request: web.Request) -> web.Response:
    """Decide, bound to the version and action hash you reviewed."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    body = await body_of(request, DecisionRequest)
    approval = await ctx.visible(caller, request.match_info["id"], acting=True)  # outside its roles: 403 below, audited
    reviewer = await ctx.reviewer(caller, approval)
    kind, args = _answered(body, approval)
    try:
        decided = await ctx.lifecycle.decide(
            DecideRequest(
                approval.id,
                reviewer,
                kind,
                expected_version=body.expected_version,
                expected_hash=body.action_hash,
                reason=body.reason,
                args=args,
                via=caller.via,
                replace_args=body.replace_args,
                view_digest=body.view_digest,
                confirm=body.confirm,
            ),
            seen=approval,  # as read to check it is visible: the store's atomic step checks its version
        )
    except DecisionRefused as exc:
        try:
            current = await ctx.lifecycle.store.approvals.get(approval.id)
        except NotFound:
            current = None
        raise from_engine(exc, current) from None
    except EngineError as exc:
        raise from_engine(exc, approval) from None
    done = decided.approval
    note = practice_note(done) if is_practice(done) else None  # told to the decider only, in this answer
    view = ApprovalView.of(done, ctx.present(done)).model_copy(
        update={"can_decide": await ctx.can_decide(caller, done), "practice": note}
    )
    return _json(view)


def _answered(body: DecisionRequest, approval: Approval) -> tuple[DecisionKind, dict[str, Any] | None]:
    """The decision and edit a request makes: with ``answer``, the edit that adds it to a question (a modify);
    ``answer`` on anything else, or beside ``args``, is refused with 422."""
    if body.answer is None:
        return body.decision, body.args
    if approval.tool != ASK_PERSON:
        raise ApiError(422, str(ErrorCode.INVALID_INPUT), f"{approval.id} is no question: answer is for ask_person")
    if body.decision not in (DecisionKind.APPROVE, DecisionKind.MODIFY) or body.args is not None or body.replace_args:
        raise ApiError(
            422,
            str(ErrorCode.INVALID_INPUT),
            "answer goes with decision approve (or modify) and no args: send the answer alone",
        )
    return DecisionKind.MODIFY, {"answer": body.answer}


async def wait(request: web.Request) -> web.Response:
    """Long-poll until the approval's version passes after_version (or the timeout)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    q = query_of(request, WaitQuery)
    approval = await ctx.visible(caller, request.match_info["id"])
    if approval.version <= q.after_version and q.timeout > 0:
        approval = await ctx.lifecycle.store.approvals.wait_changed(
            approval.id, after_version=q.after_version, timeout=q.timeout
        )
    view = ApprovalView.of(approval, ctx.present(approval))
    return _json(view.model_copy(update={"can_decide": await ctx.can_decide(caller, approval)}))


async def audit(request: web.Request) -> web.Response:
    """The newest audit entries, oldest first (admin).

    The whole trail (every approval's entries and the runs'): for an admin token narrowed to nothing; one narrowed to
    roles or tools reads the entries of the approvals it reaches only (:func:`_narrowed`); a reader gets one
    approval's.
    """
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.ADMIN)
    q = query_of(request, AuditQuery)
    if caller.roles is None and caller.tools is None:
        entries = await ctx.lifecycle.store.audit.entries(limit=q.limit)
    else:
        entries = await _narrowed(ctx, caller, q.limit)
    return web.json_response(AuditList(entries=[AuditView.of(e) for e in entries]).model_dump(mode="json"))


NARROWED_SCAN = 5000
"""How many of the newest audit entries a narrowed admin token's read looks through for the ones it may read."""


async def _narrowed(ctx: ApiContext, caller: Caller, limit: int) -> list[AuditEntry]:
    """The newest ``limit`` entries, oldest first, among the newest :data:`NARROWED_SCAN`, that an admin token
    narrowed to roles or tools may read: those of an approval it may read (:func:`may_see`: of its tools, within its
    roles by the rule it decides and withdraws by, or asked by its own identity). An entry tied to no approval (a
    run's, a grant's, a halt's, a refused request's) is left out, as is one of an approval no longer stored: nothing
    says which roles it concerns, and the narrowing must not be read past (fail closed)."""
    store, now = ctx.lifecycle.store, ctx.lifecycle.contexts.clock.now()
    reaches: dict[str, bool] = {}
    kept: list[AuditEntry] = []
    for entry in reversed(await store.audit.entries(limit=NARROWED_SCAN)):
        approval_id = entry.approval_id
        if approval_id is None:
            continue
        if approval_id not in reaches:
            try:
                a = await store.approvals.get(approval_id)
            except NotFound:
                reaches[approval_id] = False
            else:
                reaches[approval_id] = may_see(caller, a, now=now)
        if reaches[approval_id]:
            kept.append(entry)
            if len(kept) == limit:
                break
    return kept[::-1]


def routes() -> list[Endpoint]:
    """The approval and audit endpoints."""
    return [
        Endpoint("GET", "/audit", audit, AuditList, (403, 422), query=AuditQuery),
        Endpoint("GET", "/approvals", list_approvals, ApprovalList, (403, 422), query=ListQuery),
        Endpoint("GET", "/approvals/{id}", get_approval, ApprovalView, (403, 404)),
        Endpoint("POST", "/approvals/{id}/decisions", decide, ApprovalView, (403, 404, 409, 423), body=DecisionRequest),
        Endpoint("GET", "/approvals/{id}/wait", wait, ApprovalView, (403, 404, 422), query=WaitQuery),
    ]
