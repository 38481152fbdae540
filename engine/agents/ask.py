"""The ask API for agents: ask before a risky tool, get the decision from any channel.

    approvals = Approvals(service)
    answer = await approvals.ask("refund", {"order_id": "78291", "amount": 899},
                                 evidence=customer_message, session=run_id)
    if answer.approved:
        refund(**answer.args)          # the approved (possibly modified) arguments

Asking again for the same action in the same session re-attaches to the same approval until it is used, so a
restarted agent picks up the decision instead of asking twice. An approval authorizes one execution: ``ask``
hands it to one caller (recorded as executed), and an identical action afterwards is a new request. Callers that
waited on the same approval at once get one hand-over between them: exactly one answer is ``approved``, the others
are ``handed_elsewhere`` (naming the approval) and must not act. ``guard``
wraps a function so it runs only when approved, exactly once, under hitl's execution ledger.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, cast, overload

from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate
from hitl.engine.consequences.callables import ConsequenceFn
from hitl.engine.domain.models import Approval, ApprovalKind, Status
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput, NotFound
from hitl.engine.execution.schema import HITL_PARAMETERS, signature_schema
from hitl.engine.process.workers import worker_name
from hitl.engine.service import ApprovalService

__all__ = ["ActionRejected", "Answer", "Approvals", "Guard"]

P = ParamSpec("P")
R = TypeVar("R")


class Guard(Protocol):
    """What ``@approvals.guard(...)`` applies: the function, gated, as a coroutine function with the same parameters
    and the same result (awaited when the function is itself a coroutine function)."""

    @overload
    def __call__(self, fn: Callable[P, Awaitable[R]], /) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Callable[P, Coroutine[Any, Any, R]]: ...


AnswerStatus = Literal["approved", "rejected", "expired", "cancelled", "handed_elsewhere"]

_FINAL: dict[Status, AnswerStatus] = {
    Status.APPROVED: "approved",
    Status.EXECUTING: "approved",
    Status.EXECUTED: "approved",
    Status.FAILED: "approved",
    Status.REJECTED: "rejected",
    Status.EXPIRED: "expired",
    Status.CANCELLED: "cancelled",
}


@dataclass(frozen=True)
class Answer:
    """A decision, as the asking agent sees it."""

    status: AnswerStatus
    args: dict[str, Any]
    """The arguments to run with (a reviewer may have modified them)."""
    approval: Approval | None = None
    """None when the policy let the action run without asking."""
    reason: str | None = None
    receipt: str | None = None
    """With ``receipts:`` in ``hitl.yaml``, for an approved answer: the signed receipt the protected system checks
    before it acts (``hitl.receipts.verify``), issued when the answer was handed to this caller."""

    @property
    def approved(self) -> bool:
        """True when a person approved the call (as asked, or modified)."""
        return self.status == "approved"

    @property
    def modified(self) -> bool:
        """True when the reviewer changed the arguments (run ``args``, not what was asked)."""
        return self.approval is not None and self.approval.approved_args is not None


class ActionRejected(EngineError):
    """A guarded call was not approved (rejected, expired, cancelled or denied)."""

    default_code = ErrorCode.ACTION_REJECTED


class Approvals:
    """Ask for approval and wait for the decision, whichever channel makes it.

    Args:
        service: the approval service (policy, store, reviewers).
        wait: default seconds to wait for a decision; the approval's own expiry always bounds it.
    """

    def __init__(self, service: ApprovalService, *, wait: float = 24 * 3600.0, framework: str = "ask") -> None:
        self.svc = service
        self.framework = framework
        self.gate = ToolGate(service, worker_id=worker_name(framework), wait_default=wait)

    async def ask(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        session: str,
        evidence: str = "",
        requester: str | None = None,
        wait: float | None = None,
        call_id: str | None = None,
        schema: dict[str, Any] | None = None,
        modifiable: bool = True,
        consequence: ConsequenceFn | None = None,
    ) -> Answer:
        """Propose the action; return at once if the policy allows it, else wait for the decision.

        An approved answer is handed to the caller: the approval is recorded as executed (it authorizes this one
        execution), so asking for the identical action again is a new request. Of several callers waiting on the same
        approval, one is handed it; the others get ``handed_elsewhere`` (not approved) naming the approval.
        ``consequence``: the tool's own account of what the call will do (a callable given a copy of the validated
        arguments, returning a sentence or a mapping with a ``summary``), shown to reviewers as "What will happen";
        ``hitl.yaml``'s ``consequence:`` for the tool wins over it.
        """
        call = ToolCall(
            tool,
            args,
            session=session,
            framework=self.framework,
            call_id=call_id,
            schema=schema,
            evidence=evidence,
            requester=requester,
            modifiable=modifiable,
            consequence=consequence,
        )
        ticket = await self.gate.decide(call, timeout=wait)
        while True:
            try:
                if ticket.runs and self.gate.receipted_when_allowed(ticket):
                    ticket = await self.gate.begin(ticket)  # its receipt
                elif ticket.runs and ticket.approval is not None:
                    # The hand-over is the execution claim: one atomic claim per approval, so one caller gets the go.
                    ticket = await self.gate.begin(ticket)
                    await self.gate.finish(ticket, ok=True, detail=f"handed to the {self.framework} caller to run")
                return _answer(ticket)
            except GateRefused as exc:
                if exc.code is ErrorCode.HANDED_ELSEWHERE:
                    return Answer("handed_elsewhere", {}, ticket.approval, exc.message)
                if exc.code is not ErrorCode.CONSEQUENCE_DRIFTED:
                    raise
                # Nothing was handed over: wait on the approval that asks again (or end with the one expired).
                ticket = await self.gate.wait(await self.gate.refresh(ticket), timeout=wait)

    async def wait(self, approval: Approval, *, wait: float | None = None) -> Answer:
        """Wait until ``approval`` is decided (following supersessions) or expires. When ``wait`` passes first, the
        approval is cancelled (an agent that stopped waiting must not be approved behind its back). Only an action's
        approval is waited on: any other kind (a practice copy, a spot check) answers as an approval that does not
        exist (:class:`~hitl.engine.errors.NotFound`), so an agent learns nothing from it."""
        if approval.kind is not ApprovalKind.ACTION:
            raise NotFound.approval(approval.id)
        ticket = await self.gate.wait(await self.gate.ticket_of(approval), timeout=wait)
        return _answer(ticket)

    def guard(
        self,
        tool: str | None = None,
        *,
        session: str | Callable[..., str],
        evidence: str = "",
        schema: dict[str, Any] | None = None,
        consequence: ConsequenceFn | None = None,
    ) -> Guard:
        """Run the decorated function only when approved, with the approved arguments, exactly once.

        The wrapper is always a coroutine function. Raises :class:`ActionRejected` when not approved. The
        argument schema reviewers edit against is ``schema``, else the one derived from the function's
        signature, else (a signature pydantic cannot describe) ``hitl.yaml``'s for the tool. ``consequence``: what
        a call will do, computed from its arguments and shown to reviewers (see :meth:`ask`).
        """

        def deco(fn: Callable[P, Any]) -> Callable[P, Coroutine[Any, Any, Any]]:
            name = tool or fn.__name__
            sig = inspect.signature(fn)
            try:
                declared = schema if schema is not None else signature_schema(name, fn)
            except InvalidInput:
                declared = None

            @functools.wraps(fn)
            async def wrapper(*a: P.args, **kw: P.kwargs) -> Any:
                bound = sig.bind(*a, **kw)
                bound.apply_defaults()
                args = {k: v for k, v in bound.arguments.items() if k not in HITL_PARAMETERS}
                sid = session(*a, **kw) if callable(session) else session
                call = ToolCall(
                    name,
                    args,
                    session=sid,
                    framework=self.framework,
                    evidence=evidence,
                    schema=declared,
                    consequence=consequence,
                )
                ticket = await self.gate.decide(call)
                while True:
                    if not ticket.runs:
                        answer = _answer(ticket)
                        raise ActionRejected(
                            f"{name} was not approved ({answer.status}): {answer.reason or 'no reason'}",
                            status=answer.status,
                        )
                    try:
                        return await self.gate.execute(ticket, fn)
                    except GateRefused as exc:
                        if exc.code is ErrorCode.CONSEQUENCE_DRIFTED:  # nothing ran: wait on the approval asking again
                            ticket = await self.gate.wait(await self.gate.refresh(ticket))
                            continue
                        status = "handed_elsewhere" if exc.code is ErrorCode.HANDED_ELSEWHERE else "rejected"
                        raise ActionRejected(
                            exc.message, status=status, approval_id=exc.context.get("approval_id")
                        ) from None

            return wrapper

        return cast(Guard, deco)


def _answer(ticket: Ticket) -> Answer:
    approval = ticket.approval
    if ticket.runs:
        return Answer("approved", ticket.args, approval, receipt=ticket.receipt)
    if approval is None:
        return Answer("rejected", {}, None, ticket.message)
    status = _FINAL.get(approval.status, "cancelled")
    return Answer(status, approval.execute_args, approval, approval.reason or ticket.message)
