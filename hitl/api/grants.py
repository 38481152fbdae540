"""``/trust``: the trust grants in force, and ending them. A reader sees the grants of tools it may decide (an admin
sees all); ending one takes the ``decide`` scope and the right to decide its tool. Refusals are audited."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from hitl.engine.config.api import Scope

from .context import CONTEXT, ApiContext, TokenReviewers, caller_of, query_of
from .problems import ApiError
from .routes import Endpoint
from .tokens import Caller
from .trust_models import TrustList, TrustQuery, TrustRevoked, TrustView

__all__ = ["routes"]


async def _decides(ctx: ApiContext, caller: Caller) -> Callable[[str], bool]:
    """Whether this token may decide a tool: its reviewer's roles (narrowed to the token's, read once) hold the
    role the tool asks for, and the token sees the tool; an admin token may decide every tool, within the roles
    and tools it is narrowed to when it names some (as it withdraws an approval only within them)."""
    config = ctx.config.current()[0]
    if Scope.ADMIN in caller.scopes:
        if caller.roles is None:
            return caller.sees  # every role: every tool the token sees, as it sees their approvals
        # The admin scope stands for every role; the token's own roles narrow it by the one rule deciding uses.
        roles = caller.roles
    else:
        reviewers = ctx.lifecycle.contexts.default.service.reviewers
        roles = (await TokenReviewers(caller, reviewers).reviewer(caller.reviewer)).roles
    return lambda tool: caller.sees(tool) and config.may_decide_tool(roles, tool)


async def listed(request: web.Request) -> web.Response:
    """The grants in force of the tools this token may decide (every grant, for an admin)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    now = ctx.lifecycle.contexts.clock.now()
    decides = await _decides(ctx, caller)
    grants = [TrustView.of(g) for g in await ctx.lifecycle.store.trust.all_active(now=now) if decides(g.tool)]
    return web.json_response(TrustList(grants=grants).model_dump(mode="json"))


async def revoke(request: web.Request) -> web.Response:
    """End the grants of a tool in a session (every requester's, or one ``requester``'s): audited."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    q = query_of(request, TrustQuery)
    if not (await _decides(ctx, caller))(q.tool):
        refusal = ApiError(
            403,
            "not_eligible",
            f"{caller.reviewer} may not decide {q.tool} with this token (its roles and tools), so may not end its "
            "trust; end it with a token that may decide it",
        )
        await ctx.refused(request, refusal)  # a code the engine audits elsewhere: audited here, once
        raise refusal
    now = ctx.lifecycle.contexts.clock.now()
    n = await ctx.lifecycle.store.trust.revoke(q.session, q.tool, requester=q.requester, by=caller.reviewer, now=now)
    if not n:
        raise ApiError(404, "not_found", f"{q.tool} is not trusted in session {q.session}; GET /api/v1/trust lists")
    return web.json_response(TrustRevoked(revoked=n).model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The trust grant routes."""
    return [
        Endpoint("GET", "/trust", listed, TrustList),
        Endpoint("DELETE", "/trust", revoke, TrustRevoked, (403, 404, 422), query=TrustQuery),
    ]
