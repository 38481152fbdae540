"""Oversight over HTTP: the stop switch (``/halt``, ``/unhalt`` with an ``admin`` token; ``/halts`` for a reader), the
practice approvals still waiting (``/practice``) and the figures per reviewer (``/reviewers``), ``admin`` only (and
an ``admin`` token narrowed to roles only when they hold ``oversight.admin_role``)."""

from __future__ import annotations

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.reviewer_figures import by_reviewer
from hitl.engine.errors import EngineError
from hitl.engine.storage.paging import every_pending, recent_since

from .context import CONTEXT, ApiContext, body_of, caller_of, query_of
from .models import ApprovalList, ApprovalView, iso
from .oversight_models import (
    HaltList,
    HaltRequest,
    HaltView,
    ReviewerFiguresList,
    ReviewerFiguresView,
    ReviewersQuery,
    Unhalted,
    UnhaltRequest,
)
from .problems import ApiError, from_engine
from .routes import Endpoint
from .tokens import Caller

__all__ = ["routes"]


async def _overseer(request: web.Request) -> Caller:
    """The ``admin`` caller, refused (403 ``not_eligible``, audited) when its token is narrowed to roles that do not
    hold ``oversight.admin_role``: it oversees only by the rule Slack's ``/hitl halt`` asks of a person."""
    caller = caller_of(request, Scope.ADMIN)
    ctx = request.app[CONTEXT]
    if caller.roles is not None and ctx.config.current()[0].may_halt(caller.roles) is not True:
        refusal = ApiError(
            403,
            "not_eligible",
            f"this token is limited to the roles {', '.join(sorted(caller.roles)) or '(none)'}, none of them the "
            "admin role (oversight.admin_role): oversee with a token not narrowed to roles, or one that holds it",
        )
        await ctx.refused(request, refusal)
        raise refusal
    return caller


def _view(o: HaltOrder) -> HaltView:
    return HaltView(scope=o.scope, by=o.by, reason=o.reason, at=iso(o.at))


async def halt(request: web.Request) -> web.Response:
    """Halt a tool, or every tool: nothing new of it is proposed, approved or executed until it is unhalted."""
    ctx = request.app[CONTEXT]
    caller = await _overseer(request)
    body = await body_of(request, HaltRequest)
    try:
        order = await ctx.lifecycle.halt(body.tool, by=caller.reviewer, reason=body.reason)
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response(_view(order).model_dump(mode="json"))


async def unhalt(request: web.Request) -> web.Response:
    """Lift a halt, and resume the runs it paused."""
    ctx = request.app[CONTEXT]
    caller = await _overseer(request)
    body = await body_of(request, UnhaltRequest)
    try:
        lifted, resumed = await ctx.lifecycle.unhalt(body.tool, by=caller.reviewer)
    except EngineError as exc:
        raise from_engine(exc) from None
    if lifted is None:
        what = "every tool" if body.tool is None else body.tool
        raise ApiError(404, "not_found", f"{what} is not halted; GET /api/v1/halts lists the halts in force")
    return web.json_response(Unhalted(halt=_view(lifted), resumed_runs=resumed).model_dump(mode="json"))


async def listed(request: web.Request) -> web.Response:
    """The halts in force."""
    ctx = request.app[CONTEXT]
    caller_of(request, Scope.READ)
    try:
        orders = await ctx.lifecycle.store.halts.active()
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response(HaltList(halts=[_view(o) for o in orders]).model_dump(mode="json"))


async def reviewers(request: web.Request) -> web.Response:
    """The oversight figures per reviewer (admin only): decisions, corrections, practice caught and missed."""
    ctx = request.app[CONTEXT]
    await _overseer(request)
    q = query_of(request, ReviewersQuery)
    start = ctx.lifecycle.contexts.clock.now() - q.seconds
    seen = await recent_since(ctx.lifecycle.store.approvals, start)
    figures = [
        ReviewerFiguresView(**vars(f), catch_rate=f.catch_rate, audit_yield=f.audit_yield)
        for f in by_reviewer(seen, since=start)
    ]
    listed = ReviewerFiguresList(since=iso(start), reviewers=figures)
    return web.json_response(listed.model_dump(mode="json"))


async def practice(request: web.Request) -> web.Response:
    """The practice approvals still waiting (admin only)."""
    ctx = request.app[CONTEXT]
    await _overseer(request)
    try:
        found = [_planted(a, ctx) async for a in every_pending(ctx.lifecycle.store.approvals) if is_practice(a)]
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response(ApprovalList(items=found, cursor=None).model_dump(mode="json"))


def _planted(a: Approval, ctx: ApiContext) -> ApprovalView:
    """A practice approval as an admin lists it: with what was planted, and in a copy of which approval."""
    planted = {k: str(a.metadata[k]) for k in ("defect", "says", "of") if k in a.metadata}
    return ApprovalView.of(a, ctx.present(a)).model_copy(update={"planted": planted})


def routes() -> list[Endpoint]:
    """The oversight routes."""
    return [
        Endpoint("GET", "/practice", practice, ApprovalList, errors=(403,)),
        Endpoint("POST", "/halt", halt, HaltView, body=HaltRequest, errors=(403,)),
        Endpoint("POST", "/unhalt", unhalt, Unhalted, body=UnhaltRequest, errors=(403, 404)),
        Endpoint("GET", "/halts", listed, HaltList),
        Endpoint("GET", "/reviewers", reviewers, ReviewerFiguresList, (403, 422), query=ReviewersQuery),
    ]
