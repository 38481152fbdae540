"""``/proposals`` and ``/executions``: a remote agent (any language) gets the contract the Python gate gives.

Propose a call (the policy answers run, deny or pending); once it is approved, claim its one execution with the
hash of exactly what will run, run it, and report the outcome. A second claim of the same approval is refused,
and a claim whose holder vanished is recovered as "in doubt", never handed out again.
"""

from __future__ import annotations

from aiohttp import web

from hitl.engine.agents.gate import Ticket, ToolCall, ToolGate
from hitl.engine.config.api import Scope
from hitl.engine.domain.hashing import action_hash
from hitl.engine.errors import EngineError, ErrorCode

from .context import CONTEXT, ApiContext, body_of, caller_of
from .execution_models import ClaimRequest, ClaimView, OutcomeRequest, ProposalRequest, ProposalView
from .models import ApprovalView
from .problems import ApiError, from_engine
from .routes import Endpoint
from .tokens import Caller

__all__ = ["routes"]

FRAMEWORK = "api"
_KEY_PREFIX = "call:"


def _gate(ctx: ApiContext, caller: Caller, *, lease: float = 300.0) -> ToolGate:
    # The holder is the token, so only the token that claimed an execution can report its outcome.
    return ToolGate(ctx.lifecycle.contexts.default.service, worker_id=f"api:{caller.token}", lease=lease)


async def propose(request: web.Request) -> web.Response:
    """Propose a tool call: the policy's verdict and, when a person must decide, the approval."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.PROPOSE)
    body = await body_of(request, ProposalRequest)
    if not caller.sees(body.tool):
        raise ApiError(403, "tool_not_allowed", f"this token may not propose {body.tool}")
    call = ToolCall(
        body.tool,
        body.args,
        session=body.session,
        framework=FRAMEWORK,
        call_id=body.idempotency_key,
        schema=body.args_schema,
        agent=body.agent,
        evidence=body.evidence,
        requester=caller.reviewer,
        on_behalf_of=caller.acts_for,  # the token's configuration says whom; nothing in the body can
    )
    try:
        gate = _gate(ctx, caller)
        ticket = await gate.check(call)
        if ticket.runs and gate.receipted_when_allowed(ticket):
            ticket = await gate.begin(ticket)  # its receipt
    except EngineError as exc:
        raise from_engine(exc) from None
    if ticket.code == ErrorCode.HALTED:  # the stop switch: a retryable refusal, not the policy's verdict
        raise ApiError(423, str(ErrorCode.HALTED), ticket.message or "halted", retryable=True)
    return web.json_response(_proposal(ctx, ticket).model_dump(mode="json"), status=200)


def _proposal(ctx: ApiContext, ticket: Ticket) -> ProposalView:
    a = ticket.approval
    return ProposalView(
        verdict=ticket.outcome,
        args=dict(ticket.args) if ticket.runs else {},
        message=ticket.message or None,
        code=ticket.code or None,
        approval=ApprovalView.of(a, ctx.present(a)) if a is not None else None,
        execution_key=ticket.key,
        receipt=ticket.receipt,
    )


async def _ticket(ctx: ApiContext, caller: Caller, key: str, gate: ToolGate) -> Ticket:
    if not key.startswith(_KEY_PREFIX):
        raise ApiError(404, str(ErrorCode.NOT_FOUND), f"no execution {key!r}; use the execution_key a proposal gave")
    approval = await ctx.visible(caller, key.removeprefix(_KEY_PREFIX), own=True)
    if approval.metadata.get("framework") != FRAMEWORK:
        # Executions proposed by an in-process adapter are that adapter's to run.
        raise ApiError(404, str(ErrorCode.NOT_FOUND), f"no execution {key!r} was proposed through the API")
    return await gate.ticket_of(approval)


async def claim(request: web.Request) -> web.Response:
    """Claim an approved call's one execution."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.PROPOSE)
    body = await body_of(request, ClaimRequest)
    gate = _gate(ctx, caller, lease=body.lease)
    ticket = await _ticket(ctx, caller, request.match_info["key"], gate)
    if ticket.runs and action_hash(ticket.call.tool, ticket.args) != body.action_hash:
        raise ApiError(
            409,
            str(ErrorCode.HASH_MISMATCH),
            "action_hash is not the hash of what was approved (a reviewer may have modified it): read the approval "
            "again and run its execute_args, claiming with its execute_hash",
        )
    try:
        ticket = await gate.begin(ticket)
    except EngineError as exc:
        raise from_engine(exc, ticket.approval) from None
    assert ticket.approval is not None and ticket.key is not None
    view = ClaimView(
        key=ticket.key,
        acquired=True,
        args=dict(ticket.args),
        approval=ApprovalView.of(ticket.approval, ctx.present(ticket.approval)),
        receipt=ticket.receipt,
    )
    return web.json_response(view.model_dump(mode="json"))


async def outcome(request: web.Request) -> web.Response:
    """Report how a claimed execution went."""
    ctx = request.app[CONTEXT]
    caller = caller_of(request, Scope.PROPOSE)
    body = await body_of(request, OutcomeRequest)
    gate = _gate(ctx, caller)
    ticket = await _ticket(ctx, caller, request.match_info["key"], gate)
    assert ticket.key is not None
    found = await ctx.lifecycle.store.ledger.get(ticket.key)
    if found is None:
        raise ApiError(409, "not_claimed", f"{ticket.key} was never claimed; claim it before reporting its outcome")
    try:
        await gate.finish(ticket, ok=body.ok, detail=body.detail)
    except EngineError as exc:
        raise from_engine(exc, ticket.approval) from None
    approval = await ctx.lifecycle.store.approvals.get(ticket.key.removeprefix(_KEY_PREFIX))
    return web.json_response(ApprovalView.of(approval, ctx.present(approval)).model_dump(mode="json"))


def routes() -> list[Endpoint]:
    """The proposal and execution endpoints (an agent's calls through the gate)."""
    return [
        Endpoint("POST", "/proposals", propose, ProposalView, (403, 409, 423), body=ProposalRequest),
        Endpoint("POST", "/executions/{key}/claim", claim, ClaimView, (403, 404, 409, 423), body=ClaimRequest),
        Endpoint("POST", "/executions/{key}/outcome", outcome, ApprovalView, (403, 404, 409), body=OutcomeRequest),
    ]
