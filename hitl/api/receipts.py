"""``/receipts``: another process claims an approved execution with its receipt, and a protected system spends a
receipt once.

``/receipts/claim`` is how an agent process gets a receipt without holding the key: ``hitl serve`` claims the
execution for it, signing the arguments the approval says run (read from the store, never taken from the caller),
and the claim's own atomic step records the issue; the one claimant that gets the go moves the approval to
``executing``, as every hand-over does. ``/receipts/redeem`` checks a receipt first (its signature with
this deployment's keys, its type, its time, and that it is for the token's audience); only then is it spent, in one
atomic step of the store, and the spending is audited in its approval's trail."""

from __future__ import annotations

import hashlib
import json
import logging

from aiohttp import web

from hitl.engine.config.api import Scope
from hitl.engine.domain.actions import window_events
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import EngineError, ErrorCode, NotFound
from hitl.engine.execution.drift import DriftCheck
from hitl.engine.execution.effects import Effects, refuse_non_actions
from hitl.engine.receipts.claims import AllowedCall, Basis, ReceiptStatus, Redemption, approval_of
from hitl.engine.receipts.ports import ReceiptClaims
from hitl.engine.runtime.lifecycle import run_of
from hitl.engine.subscribers.windows import forget_windows
from hitl.receipts import Keys, ReceiptError, ReceiptFailure, verified_claims

from .context import CALLER, CONTEXT, ApiContext, M, body_of, caller_of, within_token_roles
from .execution_models import (
    AllowedReceiptRequest,
    AllowedReceiptView,
    ExecutionClaim,
    ReceiptClaimRequest,
    ReceiptClaimView,
    Redeemed,
    RedeemRequest,
)
from .problems import ApiError, from_engine
from .receipt_models import Introspection, IntrospectRequest
from .routes import Endpoint
from .tokens import Caller

log = logging.getLogger(__name__)
_RUNS = (Status.APPROVED, Status.EXECUTING, Status.EXECUTED, Status.FAILED)
PROPOSE_FIRST = "propose_first"
"""``/receipts/allowed``'s refusal of a call the policy puts to a person: propose it, and run it once approved."""


def _issuer(request: web.Request) -> tuple[ApiContext, Caller, bool, ReceiptClaims]:
    """What both ways of getting a receipt for another process start with: the caller (with the ``claim`` scope it
    acts for any requester, else ``propose`` for its own identity) and this deployment's receipts (404 without)."""
    ctx = request.app[CONTEXT]
    acting_for_many = request[CALLER].may(Scope.CLAIM)
    caller = caller_of(request, Scope.CLAIM if acting_for_many else Scope.PROPOSE)
    receipts = ctx.lifecycle.contexts.default.service.receipts
    if receipts is None or ctx.receipt_keys is None:
        raise ApiError(404, "not_found", "this deployment issues no receipts (receipts: in hitl.yaml)")
    return ctx, caller, acting_for_many, receipts


async def claim(request: web.Request) -> web.Response:
    """Claim an approved execution for another process's ``holder``, with its receipt."""
    ctx, caller, acting_for_many, receipts = _issuer(request)
    body = await body_of(request, ReceiptClaimRequest)
    service = ctx.lifecycle.contexts.default.service
    approval = await _claimable(ctx, caller, body.key.removeprefix("call:"), any_requester=acting_for_many)
    if run_of(approval) is not None:
        # A workflow step's execution is claimed by its run, under the run's own key: claimed here too, under
        # `call:<id>`, one approval would be handed out twice, with two receipts.
        raise ApiError(
            409,
            str(ErrorCode.HANDED_ELSEWHERE),
            f"{approval.id} is a step of workflow run {approval.session_id}, which claims its execution itself; "
            "nothing was claimed: let hitl serve resume the run",
        )
    if approval.status not in _RUNS:
        raise ApiError(
            409,
            str(ErrorCode.ACTION_REJECTED),
            f"{approval.id} is {approval.status}, not approved: nothing runs by it, so it gets no receipt",
        )
    args = dict(approval.execute_args)
    if action_hash(approval.tool, args) != body.action_hash:
        raise ApiError(
            409,
            str(ErrorCode.HASH_MISMATCH),
            "action_hash is not the hash of what was approved (a reviewer may have modified it); nothing was claimed",
        )
    try:
        refuse_non_actions(approval)
        await service.switch.check(approval.tool)
        # consequence_check: the same check as every other hand-over (a drift asks again, nothing is handed out).
        await DriftCheck(service, f"api:{caller.token}").before_running(approval)
        claimed = await receipts.claim(
            approval,
            args,
            key=body.key,
            action_hash=body.action_hash,
            holder=body.holder,
            lease=body.lease,
            retry_failed=body.retry_failed,
        )
        if claimed.claim.acquired and not claimed.claim.recovered:
            # The hand-over every execution claim makes: the approval moves to executing with the claim (bound to
            # its version), so nothing else reads it as still approved; superseded or expired meanwhile by another
            # caller's drift check, the claim is let go unrun and nothing is handed out.
            handing = Effects(ctx.lifecycle.store, service.clock, worker_id=body.holder)
            await handing.handed_over(approval, key=body.key, attempt=claimed.claim.attempt)
    except EngineError as exc:
        raise from_engine(exc, approval) from None
    view = ReceiptClaimView(
        claim=ExecutionClaim.model_validate(claimed.claim.model_dump(mode="json")), receipt=claimed.receipt
    )
    return web.json_response(view.model_dump(mode="json"))


__all__ = ["routes"]


async def allowed(request: web.Request) -> web.Response:
    """The receipt of another process's call that runs without a person, once this deployment's policy agrees.

    The call is proposed here, through the service's one path (argument schemas, the stop switch, the policy), and
    counted where the policy counts, under the scope that names it: the same call proposed before (an agent
    process's in-process proposal, whose gate names it with this scope) or asked again with the same ``scope``
    counts once, is judged as it was first judged, and gets the same receipt. A call the policy would put to a person
    is refused (409 ``propose_first``) and not counted: nothing ran, and its proposal counts it."""
    ctx, caller, acting_for_many, receipts = _issuer(request)
    body = await body_of(request, AllowedReceiptRequest)
    service = ctx.lifecycle.contexts.default.service
    if not caller.sees(body.tool):
        raise ApiError(403, "tool_not_allowed", f"this token may not run {body.tool}")
    requester = body.requester or caller.reviewer
    if requester != caller.reviewer and not acting_for_many:
        raise ApiError(403, "not_eligible", "a token with the propose scope asks only for its own identity's calls")
    if not receipts.covers(body.tool):
        raise ApiError(
            409,
            "not_covered",
            f"receipts.tools.{body.tool}.always is not set: a call of it that runs without a person gets no receipt",
        )
    asked = ProposeRequest(
        body.tool,
        body.args,
        session_id=body.session,
        requester=requester,
        dedupe_scope=body.scope,
        named=True,
        create=False,  # a call that needs a person is proposed by its agent, which then waits on it
    )
    try:
        proposal = await service.propose(asked)
        if proposal.verdict.denied:
            why = "; ".join(proposal.verdict.reasons) or "denied by policy"
            raise ApiError(409, str(ErrorCode.POLICY_DENIED), f"{body.tool} is denied by policy: {why}")
        if not proposal.may_run:
            if proposal.approval is not None:  # what this asking added: the proposal that follows counts the call
                await forget_windows(ctx.lifecycle.store, window_events(proposal.approval))
            raise ApiError(
                409,
                PROPOSE_FIRST,
                f"this deployment's policy does not let {body.tool} run without a person now "
                f"({proposal.verdict.rule}); propose it (POST /api/v1/proposals with the same arguments) and run it "
                "once it is approved",
            )
        basis = Basis.TRUST if proposal.verdict.trusted else Basis.POLICY
        call = AllowedCall(body.tool, proposal.args, body.session, requester, body.scope, basis)
        receipt = await receipts.allowed(call)
    except EngineError as exc:
        raise from_engine(exc) from None
    view = AllowedReceiptView(receipt=receipt, basis="trust" if basis is Basis.TRUST else "policy")
    return web.json_response(view.model_dump(mode="json"))


async def _claimable(ctx: ApiContext, caller: Caller, approval_id: str, *, any_requester: bool) -> Approval:
    """The approval whose execution ``caller`` may claim (404 otherwise, as for one that does not exist): with the
    ``claim`` scope any of a tool its token sees, within its ``roles`` when it names some (a narrowed token reaches
    no further when it claims than when it reads); with ``propose``, only its own identity's."""
    if not any_requester:
        return await ctx.visible(caller, approval_id, own=True)
    try:
        approval = await ctx.lifecycle.store.approvals.get(approval_id)
    except NotFound:
        approval = None
    now = ctx.lifecycle.contexts.clock.now()
    if approval is None or not caller.sees(approval.tool) or not within_token_roles(caller, approval, now):
        raise ApiError(404, str(ErrorCode.NOT_FOUND), f"no approval {approval_id!r}")
    return approval


async def _receipt_call(request: web.Request, model: type[M]) -> tuple[ApiContext, Caller, M, Keys, float]:
    """What a call that reads a receipt starts from: the context, its caller (a token that may redeem), its body as
    ``model``, the deployment's receipt keys (404 when it issues no receipts) and the time now."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.REDEEM)
    body = await body_of(request, model)
    if ctx.receipt_keys is None:
        raise ApiError(404, "not_found", "this deployment issues no receipts (receipts: in hitl.yaml)")
    return ctx, caller, body, ctx.receipt_keys, ctx.lifecycle.contexts.clock.now()


async def redeem(request: web.Request) -> web.Response:
    """Spend a receipt: 200 the first time (and again for the same redemption id), 409 once spent."""
    ctx, caller, body, keys, now = await _receipt_call(request, RedeemRequest)
    try:
        claims = verified_claims(body.receipt, keys=keys, audience=caller.audience, now=now)
    except ReceiptError as exc:
        code = "expired" if exc.code is ReceiptFailure.EXPIRED else "invalid_receipt"
        raise ApiError(422, code, f"{exc.message} ({exc.code}); nothing was spent") from None
    if not caller.sees(str(claims["tool"])):
        raise ApiError(
            403, "tool_not_allowed", f"this token may not redeem receipts for {claims['tool']}; nothing was spent"
        )
    found = await ctx.lifecycle.store.receipts.redeem(
        claims["jti"], approval=approval_of(claims["sub"]), redemption=_redemption_of(caller, body.redemption), now=now
    )
    entry = AuditEntry(
        at=now,
        actor=caller.via,
        event="redeemed" if found in (Redemption.FIRST, Redemption.AGAIN) else "refused",
        approval_id=claims["sub"],
        outcome="ok" if found in (Redemption.FIRST, Redemption.AGAIN) else f"receipt_{found}",
        detail=f"receipt {claims['jti']} for {claims['tool']}: {found}"
        + (f" (redemption {body.redemption})" if body.redemption else ""),
    )
    await ctx.lifecycle.store.audit.append(entry)
    if found is Redemption.FIRST:
        await _spent(ctx, approval_of(claims["sub"]))
    if found is Redemption.UNKNOWN:
        raise ApiError(422, "invalid_receipt", "this receipt was never issued here (or it expired); nothing was spent")
    if found is Redemption.SPENT:
        raise ApiError(409, "already_redeemed", f"receipt {claims['jti']} was spent before; do not act on it again")
    if found is Redemption.WITHDRAWN:
        raise ApiError(
            409, "withdrawn", f"approval {claims['sub']} was withdrawn before this receipt was spent; do not act on it"
        )
    view = Redeemed(
        jti=claims["jti"], sub=claims["sub"], tool=claims["tool"], first=found is Redemption.FIRST, claims=claims
    )
    return web.json_response(view.model_dump(mode="json"))


async def _spent(ctx: ApiContext, approval_id: str) -> None:
    """Bring the card of an approval whose receipt was just spent up to date (its Withdraw gives way to "spent": a
    redeem makes no new version). After the redeem is recorded, so a failure here is logged, never answered."""
    svc = ctx.lifecycle.contexts.default.service
    if svc.notifier is None:
        return
    try:
        await svc.notifier.approval_changed(await ctx.lifecycle.store.approvals.get(approval_id))
    except Exception:
        log.exception("could not queue the card update of %s after its receipt was spent", approval_id)


async def introspect(request: web.Request) -> web.Response:
    """What a receipt of the token's audience is now: active, consumed, withdrawn or expired."""
    ctx, caller, body, keys, now = await _receipt_call(request, IntrospectRequest)
    expired = False
    try:
        try:
            claims = verified_claims(body.receipt, keys=keys, audience=caller.audience, now=now)
        except ReceiptError as exc:
            if exc.code is not ReceiptFailure.EXPIRED:
                raise
            # Past its time: told so only once its signature and audience are the token's (no time bound now).
            claims = verified_claims(body.receipt, keys=keys, audience=caller.audience, now=now, leeway=_NO_TIME_BOUND)
            expired = True
    except ReceiptError as exc:
        raise ApiError(422, "invalid_receipt", f"{exc.message} ({exc.code})") from None
    if not caller.sees(str(claims["tool"])):
        raise ApiError(403, "tool_not_allowed", f"this token may not introspect receipts for {claims['tool']}")
    status = await ctx.lifecycle.store.receipts.status(claims["jti"], approval=approval_of(claims["sub"]), now=now)
    if expired and status is ReceiptStatus.ACTIVE:
        status = ReceiptStatus.EXPIRED
    return web.json_response(Introspection(status=status).model_dump(mode="json"))


_NO_TIME_BOUND = 1e12
"""A leeway no receipt's times exceed: to check an expired receipt's signature and audience alone."""


def _redemption_of(caller: Caller, redemption: str | None) -> str | None:
    """The redemption id as stored: bound to the token that first used it, so another token naming the same id is
    another use (409), never a retry of this one."""
    if redemption is None:
        return None
    return hashlib.sha256(json.dumps([caller.token, redemption]).encode()).hexdigest()


def routes() -> list[Endpoint]:
    """The receipt routes."""
    return [
        Endpoint(
            "POST",
            "/receipts/allowed",
            allowed,
            AllowedReceiptView,
            (403, 404, 409, 422, 423, 503),
            body=AllowedReceiptRequest,
        ),
        Endpoint(
            "POST", "/receipts/claim", claim, ReceiptClaimView, (403, 404, 409, 423, 503), body=ReceiptClaimRequest
        ),
        Endpoint("POST", "/receipts/redeem", redeem, Redeemed, (403, 404, 409, 422), body=RedeemRequest),
        Endpoint("POST", "/receipts/introspect", introspect, Introspection, (403, 404, 422), body=IntrospectRequest),
    ]
