"""hitl as an AuthZEN decision point: an API or MCP gateway asks ``POST /access/v1/evaluation`` (or a batch at
``/access/v1/evaluations``) whether a call may run now, in the words of the OpenID AuthZEN Authorization API 1.0.

An evaluation is the call's admission, not a question about it: it goes through the service's one propose path
(a tool gate, as ``/proposals`` does), so the call is counted as every other path counts it (under its
``request_id`` when it has one: asking again is the same call, counted once, answered the same). ``decision: true``
hands the call over: the policy or a Trust lets it run (its receipt in ``context``), or a live approval covers
exactly these arguments (claimed here, its receipt in ``context``, so it runs once). ``decision: false`` names why
in codes, never a rule's body or threshold. The subject is bound to the token: a gateway asks only for its own
identity or the ``subjects`` its token names."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel

from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate
from hitl.engine.config.api import Scope
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Status
from hitl.engine.domain.records import ClaimState
from hitl.engine.errors import EngineError, ErrorCode, Halted
from hitl.engine.ports import Store
from hitl.engine.receipts.claims import AllowedCall, Basis, ReceiptStatus

from .authzen_models import (
    AuthzenMetadata,
    Decision,
    Decisions,
    EvaluationItem,
    EvaluationRequest,
    EvaluationsRequest,
)
from .context import CONTEXT, ApiContext, body_of, caller_of
from .problems import ApiError, from_engine
from .routes import Endpoint
from .tokens import Caller

__all__ = ["ACCESS_PREFIX", "FRAMEWORK", "WELL_KNOWN", "metadata", "openapi", "routes"]

ACCESS_PREFIX = "/access/v1"
WELL_KNOWN = "/.well-known/authzen-configuration"
FRAMEWORK = "authzen"
"""What the approvals an evaluation creates record as their origin (``metadata.framework``)."""
CALL_VERBS = frozenset({"call", "execute", "invoke", "run", "tools/call"})
"""``action.name`` values that say "call the resource": then ``resource.id`` alone names the tool."""
M = TypeVar("M", bound=BaseModel)
_REFUSED = {ErrorCode.EFFECT_IN_DOUBT: "in_doubt"}
"""A claim refused for an approved call: its reason code (``denied`` for any other)."""
_HANDOVER_READS, _HANDOVER_PAUSE = 40, 0.05
"""How long an evaluation waits for the record of a hand-over the same call's other evaluation is making (2 s)."""
_REASONS = {"halted": "halted", "policy_denied": "denied", "rejected": "rejected", "expired": "expired"}
"""A refusal's reason code in ``context.reason``, by the gate's code; any other refusal is ``denied``."""


def _asker(request: web.Request) -> tuple[ApiContext, Caller]:
    """The context and the caller, refused (403) without the ``evaluate`` scope."""
    return request.app[CONTEXT], caller_of(request, Scope.EVALUATE)


async def _body(request: web.Request, model: type[M]) -> M:
    """The body as ``model``; a body that does not fit is 400, as the standard answers a bad request."""
    try:
        return await body_of(request, model)
    except ApiError as exc:
        if exc.status == 422:
            exc.status = 400
        raise


def _tool(asked: EvaluationRequest) -> str:
    """The tool the evaluation asks about: ``resource.id``, with ``action.name`` either a verb of calling it or the
    same name (a request whose action names another tool is refused: it is not clear which call it means)."""
    tool = asked.resource.id
    if asked.action.name not in CALL_VERBS and asked.action.name != tool:
        raise ApiError(
            400,
            str(ErrorCode.INVALID_INPUT),
            f"action.name {asked.action.name!r} names neither the tool in resource.id nor a call of it "
            f"({', '.join(sorted(CALL_VERBS))}); send the tool's name as resource.id",
        )
    return tool


def _admit(caller: Caller, asked: EvaluationRequest) -> str:
    """Check what the token may ask, before anything is counted: the subject is the token's own identity or one of
    its ``subjects`` (403 otherwise: nobody asks under another requester's trust), and the tool is one it sees."""
    if asked.subject.id != caller.reviewer and asked.subject.id not in caller.subjects:
        raise ApiError(
            403,
            "subject_not_allowed",
            f"this token asks for {caller.reviewer} (and the subjects its hitl.yaml entry lists), not for "
            f"{asked.subject.id!r}; add it to the token's subjects if this gateway speaks for it",
        )
    tool = _tool(asked)
    if not caller.sees(tool):
        raise ApiError(403, "tool_not_allowed", f"this token may not ask about {tool}")
    return tool


def _page(ctx: ApiContext, approval_id: str) -> str | None:
    """The decision page's URL, built from ``web.public_url`` alone (None without the web inbox)."""
    web_spec = ctx.config.current()[0].web
    if web_spec is None:
        return None
    return f"{web_spec.public_url.rstrip('/')}/inbox/approvals/{approval_id}"


async def _evaluate(ctx: ApiContext, caller: Caller, asked: EvaluationRequest, tool: str) -> Decision:
    """One call's admission through the service's one propose path."""
    service = ctx.lifecycle.contexts.default.service
    gate = ToolGate(service, worker_id=f"{FRAMEWORK}:{caller.token}")
    call = ToolCall(
        tool,
        asked.context.arguments,
        session=asked.context.session,
        framework=FRAMEWORK,
        call_id=asked.context.request_id,
        requester=asked.subject.id,
        # Who confirms a `self` call comes from hitl.yaml alone: the token's acts_for, for the token's own
        # identity. A subject the gateway names among its `subjects` is the gateway's word, which names nobody
        # (such a call is asked as approve, fail closed).
        on_behalf_of=caller.acts_for if asked.subject.id == caller.reviewer else None,
    )
    try:
        ticket = await gate.check(call)
        if ticket.pending:
            assert ticket.approval is not None
            found = {"reason": "approval_required", "approval_id": ticket.approval.id}
            url = _page(ctx, ticket.approval.id)
            return Decision(decision=False, context={**found, **({"approval_url": url} if url else {})})
        if not ticket.runs:
            why: dict[str, Any] = {"reason": _REASONS.get(ticket.code, "denied")}
            if ticket.approval is not None:
                why["approval_id"] = ticket.approval.id
            return Decision(decision=False, context=why)
        if ticket.approval is None:
            return await _allowed(service.receipts, ticket)
        return await _handed_over(gate, ticket)
    except EngineError as exc:
        err = from_engine(exc)
        if err.status == 422:
            err.status = 400
        raise err from None


async def _allowed(receipts: Any, ticket: Ticket) -> Decision:
    """A call the policy or a Trust lets run: its receipt (the same one for the same call asked again), where this
    deployment issues receipts."""
    basis = Basis.TRUST if ticket.allowed_by == "trust" else Basis.POLICY
    found: dict[str, Any] = {"basis": str(basis)}
    if receipts is not None:
        call = ticket.call
        allowed = AllowedCall(
            call.tool,
            dict(ticket.args),
            session=call.session,
            requester=call.requester or "",
            scope=ticket.scope,
            basis=basis,
        )
        found["receipt"] = await receipts.allowed(allowed)
    return Decision(decision=True, context=found)


async def _handed_over(gate: ToolGate, ticket: Ticket) -> Decision:
    """A live approval covers the call: its one execution is claimed here and recorded as handed to the gateway,
    with the receipt kept, so the same ``request_id`` asked again gets the same answer and nothing else runs it."""
    assert ticket.approval is not None and ticket.key is not None
    approval_id, store = ticket.approval.id, gate.service.store
    withdrawn = Decision(decision=False, context={"reason": "withdrawn", "approval_id": approval_id})
    if await _withdrawn(gate, approval_id):
        return withdrawn
    if action_hash(ticket.call.tool, ticket.call.args) != action_hash(ticket.call.tool, ticket.args):
        # A reviewer changed the arguments: the gateway would run the ones it asked about, which nobody approved.
        return Decision(decision=False, context={"reason": "modified", "approval_id": approval_id})
    if not ticket.consumed:
        try:
            claimed = await gate.begin(ticket)
        except Halted:  # halted since the call was checked: nothing new runs
            return Decision(decision=False, context={"reason": "halted", "approval_id": approval_id})
        except GateRefused as exc:
            if exc.code is not ErrorCode.HANDED_ELSEWHERE:  # in doubt, or not the approved arguments: not run
                return Decision(
                    decision=False, context={"reason": _REFUSED.get(exc.code, "denied"), "approval_id": approval_id}
                )
        except EngineError as exc:
            # Withdrawn after the look above, before the claim (which asks the ledger again, and refused it): the
            # answer the look gives, not an error.
            if exc.code is ErrorCode.ACTION_REJECTED and await _withdrawn(gate, approval_id):
                return withdrawn
            raise
        else:
            claim = await store.ledger.get(ticket.key)
            assert claim is not None and claimed.approval is not None
            record = {"handed_over": FRAMEWORK, "receipt": claimed.receipt}
            now = gate.service.clock.now()
            await store.ledger.record_outcome(
                ticket.key, holder=gate.worker_id, attempt=claim.attempt, ok=True, result=record, now=now
            )
            await gate.effects.mark(claimed.approval, Status.EXECUTED)
            if await _withdrawn(gate, approval_id):  # withdrawn while it was claimed: its receipt is not handed out
                return withdrawn
            return _covered(approval_id, claimed.receipt)
    if ticket.call.call_id is not None:
        kept = await _handed(store, ticket.key)
        if kept is not None:
            receipt = kept.get("receipt")
            return _covered(approval_id, receipt if isinstance(receipt, str) else None)
    # Run (or being run) by another caller: an approval authorizes one execution.
    return Decision(decision=False, context={"reason": "consumed", "approval_id": approval_id})


async def _withdrawn(gate: ToolGate, approval_id: str) -> bool:
    """Whether the approval was withdrawn: a gateway asks hitl itself, so hitl is the relying party here and a
    withdrawn approval admits nothing more (nor repeats a hand-over whose receipt is unspent). The ledger keeps the
    withdrawal per approval: asked with a ``jti`` no receipt has, its status is ``withdrawn`` or nothing."""
    found = await gate.service.store.receipts.status("", approval=approval_id, now=gate.service.clock.now())
    return found is ReceiptStatus.WITHDRAWN


async def _handed(store: Store, key: str) -> dict[str, Any] | None:
    """What the hand-over of ``key`` to a gateway recorded, or None when it was not handed to one. A claim still
    running may be an evaluation of the same ``request_id`` a moment ahead of this one: its record follows within
    moments of the claim (wait that long, no longer)."""
    for _ in range(_HANDOVER_READS):
        found = await store.ledger.get(key)
        if found is None:
            return None
        if found.state is not ClaimState.RUNNING:
            kept = found.result or {}
            return kept if kept.get("handed_over") == FRAMEWORK else None
        await asyncio.sleep(_HANDOVER_PAUSE)
    return None


def _covered(approval_id: str, receipt: str | None) -> Decision:
    found: dict[str, Any] = {"basis": "approval", "approval_id": approval_id}
    if receipt is not None:
        found["receipt"] = receipt
    return Decision(decision=True, context=found)


async def evaluation(request: web.Request) -> web.Response:
    """May this subject make this call now (AuthZEN access evaluation)."""
    ctx, caller = _asker(request)
    asked = await _body(request, EvaluationRequest)
    tool = _admit(caller, asked)
    answer = await _evaluate(ctx, caller, asked, tool)
    return _json(request, answer.model_dump(mode="json"))


def _items(batch: EvaluationsRequest) -> list[EvaluationRequest]:
    """The batch's evaluations, each filled from the top level where it leaves something out (400 for one that
    then still lacks a subject, action or resource). No items: the top level is the one evaluation."""
    items = batch.evaluations or []
    if not items:
        items = [EvaluationItem()]
    asked: list[EvaluationRequest] = []
    for i, item in enumerate(items):
        merged = {
            "subject": item.subject or batch.subject,
            "action": item.action or batch.action,
            "resource": item.resource or batch.resource,
        }
        missing = [k for k, v in merged.items() if v is None]
        if missing:
            where = f"evaluations[{i}]" if batch.evaluations else "the body"
            raise ApiError(
                400,
                str(ErrorCode.INVALID_INPUT),
                f"{where} has no {', '.join(missing)}, here or at the batch's top level; nothing was evaluated",
            )
        context = item.context or batch.context
        asked.append(EvaluationRequest(**merged, **({"context": context} if context else {})))
    return asked


async def evaluations(request: web.Request) -> web.Response:
    """May this subject make each of these calls now (AuthZEN access evaluations, a batch)."""
    ctx, caller = _asker(request)
    batch = await _body(request, EvaluationsRequest)
    asked = _items(batch)
    tools = [_admit(caller, one) for one in asked]  # every item checked before any is counted
    semantic = batch.options.evaluations_semantic
    answers: list[Decision] = []
    for one, tool in zip(asked, tools, strict=True):
        answer = await _evaluate(ctx, caller, one, tool)
        answers.append(answer)
        if (semantic == "deny_on_first_deny" and not answer.decision) or (
            semantic == "permit_on_first_permit" and answer.decision
        ):
            break
    if not batch.evaluations:
        return _json(request, answers[0].model_dump(mode="json"))
    return _json(request, Decisions(evaluations=answers).model_dump(mode="json"))


def _json(request: web.Request, body: dict[str, Any]) -> web.Response:
    """The answer, echoing the caller's ``X-Request-ID`` as the standard asks (bounded, printable)."""
    rid = request.headers.get("X-Request-ID", "")
    echo = {"X-Request-ID": rid} if rid and len(rid) <= 200 and rid.isprintable() else {}
    return web.json_response(body, headers=echo)


def metadata(base: str) -> AuthzenMetadata:
    """This decision point's metadata, its endpoints under ``base`` (``web.public_url``, else where it was asked)."""
    root = base.rstrip("/")
    return AuthzenMetadata(
        policy_decision_point=root,
        access_evaluation_endpoint=f"{root}{ACCESS_PREFIX}/evaluation",
        access_evaluations_endpoint=f"{root}{ACCESS_PREFIX}/evaluations",
    )


def routes() -> list[Endpoint]:
    """The AuthZEN evaluation routes (under :data:`ACCESS_PREFIX`)."""
    return [
        Endpoint("POST", "/evaluation", evaluation, Decision, (400, 403, 423, 503), body=EvaluationRequest),
        Endpoint("POST", "/evaluations", evaluations, Decisions, (400, 403, 423, 503), body=EvaluationsRequest),
    ]


def openapi() -> dict[str, Any]:
    """The OpenAPI document of the evaluation routes: ``/api/v1``'s shape, but for its errors, whose body is the
    standard's error message string (``text/plain``, hitl's code first and in ``X-Hitl-Error``)."""
    from .openapi import document  # here: the document is built for its readers and tests, never on a request

    doc = document(routes(), prefix=ACCESS_PREFIX)
    for operation in (op for path in doc["paths"].values() for op in path.values()):
        for code, answer in operation["responses"].items():
            if int(code) >= 400:
                answer["content"] = {"text/plain": {"schema": {"type": "string"}}}
    return doc
