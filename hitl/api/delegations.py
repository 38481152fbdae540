"""``/delegations``: a reviewer hands their roles on while away, and ends it. The token says who delegates (its
reviewer, with the roles the token allows them: a token never hands on more than it may use); a reader sees the
delegations that concern it (an admin sees all); giving and ending take the ``decide`` scope, an admin may end any.
Every change is audited in the store's atomic step."""

from __future__ import annotations

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.delegation import parse_until, zone
from hitl.engine.errors import EngineError

from .context import CONTEXT, TokenReviewers, body_of, caller_of
from .delegation_models import DelegationEnd, DelegationList, DelegationRequest, DelegationView
from .problems import ApiError, from_engine
from .routes import Endpoint

__all__ = ["routes"]


async def listed(request: web.Request) -> web.Response:
    """The delegations in force that concern this token's reviewer (every one, for an admin)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.READ)
    found = await ctx.lifecycle.contexts.default.service.delegations.in_force()
    if Scope.ADMIN not in caller.scopes:
        found = [d for d in found if caller.reviewer in (d.delegator, d.delegate)]
    return web.json_response(DelegationList(delegations=[DelegationView.of(d) for d in found]).model_dump(mode="json"))


async def give(request: web.Request) -> web.Response:
    """Hand this token's reviewer's roles (or one) to ``delegate`` until ``until`` (at most 30 days), audited; 422
    ``invalid_delegate`` for someone no role may be handed to
    (:class:`~hitl.engine.delegation.delegates.DelegateRule`)."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    body = await body_of(request, DelegationRequest)
    service = ctx.lifecycle.contexts.default.service
    try:
        until = parse_until(body.until, zone(body.tz))
    except ValueError as exc:
        raise ApiError(422, "invalid_input", str(exc)) from None
    try:
        me = (await TokenReviewers(caller, service.reviewers).reviewer(caller.reviewer)).in_own_right()
        given = await service.delegations.give(
            me, body.delegate, until=until, role=body.role, via="api", rule=service.delegates
        )
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response(DelegationView.of(given).model_dump(mode="json"), status=201)


async def end(request: web.Request) -> web.Response:
    """End a delegation in force (``id``; none: the one this token's reviewer gave): its delegator, its delegate or
    an admin may; audited."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.DECIDE)
    body = await body_of(request, DelegationEnd)
    delegations = ctx.lifecycle.contexts.default.service.delegations
    if Scope.ADMIN in caller.scopes and caller.roles is not None and body.id is not None:
        # A role-narrowed admin token ends only a handing-on of one of its roles, as it ends only their trust.
        found = next((d for d in await delegations.in_force() if d.id == body.id), None)
        theirs = found is not None and caller.reviewer in (found.delegator, found.delegate)
        if found is not None and not theirs and (found.role is None or found.role not in caller.roles):
            what = f"the role {found.role}" if found.role else "every role its delegator holds"
            refusal = ApiError(
                403,
                "not_eligible",
                f"this token is limited to the roles {', '.join(sorted(caller.roles)) or '(none)'}, and delegation "
                f"{found.id} hands on {what}: end it with a token that holds it",
            )
            await ctx.refused(request, refusal)
            raise refusal
    try:
        ended = await delegations.end(caller.reviewer, body.id, admin=Scope.ADMIN in caller.scopes)
    except EngineError as exc:
        raise from_engine(exc) from None
    return web.json_response(DelegationView.of(ended).model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The delegation routes."""
    return [
        Endpoint("GET", "/delegations", listed, DelegationList),
        Endpoint("POST", "/delegations", give, DelegationView, (403, 422), body=DelegationRequest, status=201),
        Endpoint("POST", "/delegations/end", end, DelegationView, (403, 404), body=DelegationEnd),
    ]
