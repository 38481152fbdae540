"""The tool gate: where an agent framework's tool call meets hitl.

Every framework adapter is a thin translation over this one object, so the guarantees are written once:

- the policy is keyed by the real tool name and arguments the framework is about to run, never by display text;
- an approval is bound to one call: the framework's call id (``toolUseId``, ``tool_call_id``) when it has one, and
  for callers without ids an approval authorizes one execution (an identical call after it needs a new approval);
- an approval is handed to one caller: calls with the same call id are one call (a replay after a crash or a
  retried activity gets the recorded result of its one execution), and of several callers without ids waiting on
  one approval exactly one runs it, the others are refused with ``handed_elsewhere`` naming the approval;
- the arguments that run are the approved ones (a reviewer's Modify included), checked against the action hash;
- the effect runs under the ledger, at most once, and the approval moves to ``executing``/``executed``;
- a wait that gives up closes the approval, and any failure of hitl itself (store, schema) means the call does not
  run (:class:`Ticket` ``deny``).

The gate never talks to Slack: the agent process writes to the store, and ``hitl serve`` on the same store posts and
updates the cards.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from hitl.engine.consequences.callables import ConsequenceFn
from hitl.engine.domain.drift import DRIFTED
from hitl.engine.domain.frozen import quick_init
from hitl.engine.domain.hashing import action_hash, identical, normalize
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.records import ClaimState
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode, Halted, IllegalTransition, StaleVersion
from hitl.engine.execution.drift import DriftCheck
from hitl.engine.execution.effects import Effects, handed_elsewhere, refuse_non_actions
from hitl.engine.execution.tools import Tool
from hitl.engine.process.workers import worker_name
from hitl.engine.receipts.claims import AllowedCall, Basis
from hitl.engine.service import ApprovalService

__all__ = ["GateRefused", "Ticket", "TicketOutcome", "ToolCall", "ToolGate", "current_receipt"]

TicketOutcome = Literal["run", "deny", "pending"]

_MAX_GENERATIONS = 10_000
_RECEIPT_KW = "_hitl_receipt"
"""How the ledger's Tool hands the gate's wrapper the receipt: a name no tool argument is expected to have."""
_CONSUMED = (Status.EXECUTING, Status.EXECUTED, Status.FAILED)
_NOT_RUN = frozenset({ErrorCode.HANDED_ELSEWHERE, ErrorCode.CONSEQUENCE_DRIFTED, ErrorCode.CONSEQUENCE_UNCHECKED})
"""Refusals of an approved call that did not run, told to its caller as the gate's own (:class:`GateRefused`)."""
_RUNNING_RECEIPT: ContextVar[str | None] = ContextVar("hitl_running_receipt", default=None)


def current_receipt() -> str | None:
    """The receipt of the call hitl is running now, read from inside the tool: for a tool its framework calls
    (LangGraph, OpenAI Agents, Pydantic AI, Strands), which cannot take it as a ``receipt`` parameter. None outside
    such a call, or where no receipt is issued (``receipts:`` in ``hitl.yaml``)."""
    return _RUNNING_RECEIPT.get()


@quick_init
@dataclass(frozen=True)
class ToolCall:
    """One tool call an agent framework is about to make.

    Args:
        tool: the real tool name the framework will run.
        args: the arguments it will run with.
        session: the agent session (trust and re-attachment are per session).
        framework: who asks (``strands``, ``langgraph``, ``openai-agents``, ``pydantic-ai``, ``ask``...).
        call_id: the framework's id for this call; binds the approval to exactly this call.
        schema: the tool's JSON Schema, snapshotted on the approval (edits are validated against it).
        agent: the agent's name, shown to reviewers.
        evidence: untrusted context for the reviewer (escaped on every surface).
        requester: who asks, shown to reviewers (default: the configuration's requester).
        modifiable: False when the framework cannot run edited arguments: the approval offers no Modify.
        consequence: the tool's consequence, given beside it by the code that holds the tool (never the model):
            what the call will do, shown to reviewers (:mod:`hitl.engine.domain.consequences`).
        on_behalf_of: the person the agent acts for, as the surface authenticated them (a token's ``acts_for``,
            the MCP client's mapped principal): who confirms a ``self`` call. Never from the model's arguments.
    """

    tool: str
    args: Mapping[str, Any]
    session: str
    framework: str
    call_id: str | None = None
    schema: dict[str, Any] | None = None
    agent: str | None = None
    evidence: str = ""
    requester: str | None = None
    modifiable: bool = True
    consequence: ConsequenceFn | None = None
    on_behalf_of: str | None = None

    def metadata(self) -> dict[str, Any]:
        """What the approval records about the call's origin (framework, agent, call id, modifiable)."""
        about: dict[str, Any] = {"framework": self.framework, "modifiable": self.modifiable}
        if self.agent:
            about["agent"] = self.agent[:120]
        if self.call_id:
            about["call_id"] = self.call_id[:200]
        return about


@quick_init
@dataclass(frozen=True)
class Ticket:
    """What the gate says about a call: run (with ``args``), deny (tell the model ``message``), or pending."""

    call: ToolCall
    outcome: TicketOutcome
    args: dict[str, Any]
    """The arguments to run with: the approved ones, a reviewer's edit included."""
    approval: Approval | None = None
    """None when the policy let the call run without asking, or denied it outright."""
    message: str = ""
    """For the model: why the call did not run (a reviewer's reason reaches it here)."""
    code: str = ""
    trusted: bool = False
    """The reviewer approved with Trust: later calls of this tool in this session run without asking."""
    receipt: str | None = None
    """Once its execution is claimed (:meth:`ToolGate.begin`) where receipts are issued (``receipts:`` in
    ``hitl.yaml``): the signed receipt the protected system checks before it acts."""
    allowed_by: Literal["policy", "trust"] | None = None
    """For a call that runs without a person: whether the policy or a reviewer's Trust lets it."""
    scope: str = ""
    """For a call that runs without a person: what names it where its proposal was counted (its receipt is
    issued for that scope, so ``hitl serve`` counts the same call, not another)."""

    @property
    def runs(self) -> bool:
        """True when the call may run now (allowed, or approved)."""
        return self.outcome == "run"

    @property
    def pending(self) -> bool:
        """True while the call waits for a person's decision."""
        return self.outcome == "pending"

    @property
    def modified(self) -> bool:
        """True when a reviewer changed the arguments: run the approved ones."""
        return self.approval is not None and self.approval.approved_args is not None

    @property
    def consumed(self) -> bool:
        """The approval's one execution has started (or finished)."""
        return self.approval is not None and self.approval.status in _CONSUMED

    @property
    def key(self) -> str | None:
        """The execution's idempotency key (the approval's), None for a call that needed no approval."""
        return f"call:{self.approval.id}" if self.approval is not None else None


class GateRefused(EngineError):
    """A call the gate will not run: denied, rejected, expired, still pending, already run, or hitl failed."""

    default_code = ErrorCode.ACTION_REJECTED


@dataclass
class ToolGate:
    """Propose, wait, and run agent tool calls under hitl's guarantees.

    Args:
        service: the approval service (policy, store, reviewers, clock).
        worker_id: this gate's name in claims, leases and the audit log; unique per gate by default, so two agent
            processes never mistake each other's claim for their own.
        wait_default: default seconds to wait for a decision; the approval's own expiry always bounds it.
        lease: seconds an execution claim stays ours while the framework runs the tool without renewal (a tool
            run by the framework itself cannot renew it); a call found mid-execution past it is *in doubt*.
        consequences: each tool's consequence, by tool name, for the calls a framework adapter makes through this
            gate (a call's own ``consequence`` first; ``hitl.yaml``'s before either).
    """

    service: ApprovalService
    worker_id: str = field(default_factory=lambda: worker_name("agent"))
    wait_default: float = 24 * 3600.0
    lease: float = 3600.0
    consequences: Mapping[str, ConsequenceFn] = field(default_factory=dict)
    effects: Effects = field(init=False)

    def __post_init__(self) -> None:
        self.effects = Effects(
            self.service.store,
            self.service.clock,
            worker_id=self.worker_id,
            lease=6.0,
            switch=self.service.switch,
            receipts=self.service.receipts,
            drift=DriftCheck(self.service, self.worker_id),
        )

    # -- asking -------------------------------------------------------------------------------------------
    async def check(self, call: ToolCall) -> Ticket:
        """Propose the call (or re-attach to its approval); never waits."""
        base = f"{call.framework}:{call.session}:{call.call_id or '-'}"
        for generation in range(1, _MAX_GENERATIONS + 1):
            try:
                prop = await self.service.propose(
                    ProposeRequest(
                        call.tool,
                        call.args,
                        session_id=call.session,
                        requester=call.requester,
                        evidence=call.evidence,
                        dedupe_scope=base if generation == 1 else f"{base}#{generation}",
                        metadata=call.metadata(),
                        schema=call.schema,
                        named=call.call_id is not None,
                        consequence=call.consequence or self.consequences.get(call.tool),
                        on_behalf_of=call.on_behalf_of,
                    )
                )
            except Halted as exc:  # the stop switch: a "no" the model hears, like a denial
                return Ticket(call, "deny", {}, message=f"{call.tool} did not run: {exc.message}", code="halted")
            if prop.verdict.denied:
                why = "; ".join(prop.verdict.reasons) or "denied by policy"
                return Ticket(call, "deny", {}, message=f"{call.tool} is denied by policy: {why}", code="policy_denied")
            if prop.approval is None:
                by: Literal["policy", "trust"] = "trust" if prop.verdict.trusted else "policy"
                return Ticket(call, "run", prop.args, allowed_by=by, scope=prop.scope)
            ticket = await self.ticket_for(call, prop.approval)
            if ticket.consumed and call.call_id is None:
                continue  # an approval authorizes one execution: the same action again is a new request
            return ticket
        raise EngineError(f"{call.tool} was asked {_MAX_GENERATIONS} times in session {call.session}")

    async def ticket_for(self, call: ToolCall, approval: Approval) -> Ticket:
        """The ticket an approval's current state gives (following a modify that superseded it)."""
        approval = await self.effects.follow(approval)
        status = approval.status
        if status is Status.PENDING:
            return Ticket(call, "pending", {}, approval, message=f"{call.tool} is waiting for a reviewer")
        if status in (Status.APPROVED, *_CONSUMED):
            last = approval.decisions[-1] if approval.decisions else None
            trusted = last is not None and last.kind is DecisionKind.TRUST
            return Ticket(call, "run", dict(approval.execute_args), approval, trusted=trusted)
        if status is Status.REJECTED:
            why = approval.reason or "no reason given"
            return Ticket(
                call, "deny", {}, approval, message=f"A reviewer rejected {call.tool}: {why}", code="rejected"
            )
        if status is Status.EXPIRED:
            drifted = (approval.reason or "").startswith(DRIFTED)
            return Ticket(
                call,
                "deny",
                {},
                approval,
                message=f"{call.tool} {approval.reason if drifted else 'expired without a decision'}; it did not run",
                code="expired",
            )
        why = approval.reason or "cancelled"
        return Ticket(call, "deny", {}, approval, message=f"{call.tool} did not run: {why}", code=str(status))

    async def ticket_of(self, approval: Approval) -> Ticket:
        """The ticket an approval gives, for a caller that has only the approval (a resume in another process)."""
        call = ToolCall(
            approval.tool,
            approval.args,
            session=approval.session_id,
            framework=approval.metadata.get("framework", ""),
            call_id=approval.metadata.get("call_id"),
        )
        return await self.ticket_for(call, approval)

    async def refresh(self, ticket: Ticket) -> Ticket:
        """The ticket again from the store (a decision may have landed)."""
        if ticket.approval is None:
            return ticket
        return await self.ticket_for(ticket.call, await self.service.store.approvals.get(ticket.approval.id))

    async def wait(
        self,
        ticket: Ticket,
        *,
        timeout: float | None = None,
        keep_open: bool = False,
        step: float = 60.0,
        on_wait: Callable[[float, Approval], Awaitable[None]] | None = None,
    ) -> Ticket:
        """Wait until the call's approval is decided or expires. When ``timeout`` passes first, the approval is
        cancelled (an agent that stopped waiting was told "no": nobody may approve it behind its back), unless
        ``keep_open``: then the ticket comes back still pending, for a caller that will ask again with the same
        call (the MCP gateway). ``on_wait(seconds waited, approval)`` runs before each wait of at most ``step``
        seconds (progress for a client that is watching)."""
        clock = self.service.clock
        store = self.service.store
        budget = self.wait_default if timeout is None else timeout
        start = clock.now()
        deadline = start + budget
        while ticket.pending:
            approval = ticket.approval
            assert approval is not None
            now = clock.now()
            if now >= approval.expires_at:
                await self.service.expire_due()
                ticket = await self.refresh(ticket)
                continue
            left = min(deadline, approval.expires_at) - now
            if left <= 0 and keep_open:
                return ticket
            if left <= 0:
                try:
                    await self.service.cancel(
                        approval.id,
                        actor=approval.requester,
                        reason=f"the agent stopped waiting after {budget:g} s",
                        expected_version=approval.version,
                    )
                except (StaleVersion, IllegalTransition):
                    pass  # a decision landed meanwhile: it stands
                ticket = await self.refresh(ticket)
                continue
            if on_wait is not None:
                await on_wait(now - start, approval)
            changed = await store.approvals.wait_changed(
                approval.id, after_version=approval.version, timeout=min(left, step)
            )
            ticket = await self.ticket_for(ticket.call, changed)
        return ticket

    async def decide(self, call: ToolCall, *, timeout: float | None = None) -> Ticket:
        """:meth:`check`, then :meth:`wait` when a human is needed: the inline form."""
        return await self.wait(await self.check(call), timeout=timeout)

    # -- running ------------------------------------------------------------------------------------------
    async def execute(
        self,
        ticket: Ticket,
        fn: Callable[..., Any],
        *,
        args: Mapping[str, Any] | None = None,
        receipt_as: str | None = None,
    ) -> Any:
        """Run ``fn(**args)`` for a ``run`` ticket, exactly once per approval. A repeat of the same call (same call
        id, or this gate again) returns the recorded output; another caller without a call id that waited on the
        same approval is refused (``handed_elsewhere``, a :class:`GateRefused`).

        ``args`` are the arguments the framework is about to pass; they must be the approved ones (a framework
        that re-validates an edit must arrive at the same arguments), else nothing runs. ``receipt_as``: the
        parameter of ``fn`` that takes the execution's receipt (default ``receipt``, when ``fn`` names it; None
        where none is issued).
        """
        if not ticket.runs:
            raise GateRefused(ticket.message or f"{ticket.call.tool} was not approved", status=ticket.outcome)
        run_args = self._bound(ticket, args)
        receiver = receipt_as or ("receipt" if _names(fn, "receipt") else None)
        if ticket.approval is None:
            # Allowed without a person: nothing to record, so the framework's own output is returned as it is.
            if _names_key(fn):
                run_args["idempotency_key"] = f"auto:{ticket.call.session}:{ticket.call.call_id or '-'}"
            if receiver is not None:
                run_args[receiver] = None
            if not self.receipted_when_allowed(ticket):  # the common case, on every allowed call: as before
                return await _invoke(fn, run_args)
            receipt = await self._allowed_receipt(ticket)
            if receiver is not None:
                run_args[receiver] = receipt
            running = _RUNNING_RECEIPT.set(receipt)
            try:
                return await _invoke(fn, run_args)
            finally:
                _RUNNING_RECEIPT.reset(running)
        assert ticket.key is not None
        tool = Tool(ticket.call.tool, _kwargs_call(fn, receiver), None, receipt_as=_RECEIPT_KW)
        try:
            return await self.effects.execute(
                tool, run_args, key=ticket.key, approval=ticket.approval, exclusive=ticket.call.call_id is None
            )
        except EngineError as exc:
            if exc.code is ErrorCode.CLAIM_IN_PROGRESS:  # another caller holds the claim and is running it now
                exc = handed_elsewhere(ticket.call.tool, ticket.approval, ticket.key)
            if exc.code in _NOT_RUN:
                raise GateRefused(exc.message, code=exc.code, **exc.context) from None
            raise

    async def begin(self, ticket: Ticket, *, args: Mapping[str, Any] | None = None) -> Ticket:
        """Claim the approval's one execution for a framework that runs the tool itself (finish with
        :meth:`finish`). Refused when it already ran, is running, or its earlier run is in doubt. The receipt
        (``Ticket.receipt``) is also :func:`current_receipt` for the rest of the calling task, where the framework
        runs the tool."""
        if not ticket.runs:
            raise GateRefused(ticket.message or f"{ticket.call.tool} was not approved", status=ticket.outcome)
        self._bound(ticket, args)
        if ticket.approval is None or ticket.key is None:
            # Allowed by the policy just now, the stop switch checked in the same breath: no claim; a receipt when
            # the tool's receipts come `always`.
            receipt = await self._allowed_receipt(ticket)
            _RUNNING_RECEIPT.set(receipt)  # for the framework's own run of the tool, later in this task
            # Most allowed calls get no receipt: the ticket as it is then (a copy of a frozen dataclass costs
            # several µs of every allowed call).
            return ticket if receipt == ticket.receipt else replace(ticket, receipt=receipt)
        refuse_non_actions(ticket.approval)
        await self.service.switch.check(ticket.call.tool)  # halted: nothing new runs, even if approved before
        try:
            await self.effects.checked(ticket.approval)  # consequence_check: a drift asks again, nothing runs
        except EngineError as exc:
            if exc.code not in _NOT_RUN:
                raise
            raise GateRefused(exc.message, code=exc.code, **exc.context) from None
        try:
            claimed = await self.effects.claim(
                ticket.key,
                action_hash(ticket.call.tool, ticket.args),
                ticket.approval,
                dict(ticket.args),
                lease=self.lease,
                retry_failed=False,
            )
        except ClaimRefused as exc:
            if exc.code is not ErrorCode.CLAIM_IN_PROGRESS:
                raise GateRefused(exc.message, code=exc.code) from None
            raise GateRefused(
                handed_elsewhere(ticket.call.tool, ticket.approval, ticket.key).message,
                code=ErrorCode.HANDED_ELSEWHERE,
                approval_id=ticket.approval.id,
            ) from None
        claim = claimed.claim
        if not claim.acquired:
            state = "ran" if claim.state is ClaimState.SUCCEEDED else "ran and failed"
            raise GateRefused(
                f"{ticket.call.tool} under approval {ticket.approval.id} was already handed to a caller, which {state} "
                "it; an approval authorizes one execution, so this call did not run. Ask again for a new approval if "
                "it must run again",
                code=ErrorCode.HANDED_ELSEWHERE,
                approval_id=ticket.approval.id,
            )
        if claim.recovered:
            raise GateRefused(
                f"{ticket.call.tool} may or may not have run (its process stopped mid-call); check the system it "
                "acts on before asking again",
                code=ErrorCode.EFFECT_IN_DOUBT,
            )
        try:
            approval = await self.effects.handed_over(
                ticket.approval, key=ticket.key, attempt=claim.attempt, already=claimed.handed_over
            )
        except EngineError as exc:
            if exc.code not in _NOT_RUN:
                raise
            raise GateRefused(exc.message, code=exc.code, **exc.context) from None
        _RUNNING_RECEIPT.set(claimed.receipt)  # for the framework's own run of the tool, later in this task
        return replace(ticket, approval=approval, receipt=claimed.receipt)

    async def finish(self, ticket: Ticket, *, ok: bool, detail: str = "") -> None:
        """Record the outcome of an execution claimed with :meth:`begin`."""
        if ticket.approval is None or ticket.key is None:
            return
        store, clock = self.service.store, self.service.clock
        claim = await store.ledger.get(ticket.key)
        if claim is None:
            return
        await store.ledger.record_outcome(
            ticket.key,
            holder=self.worker_id,
            attempt=claim.attempt,
            ok=ok,
            result={"output": detail[:500]} if ok else {"error": detail[:500]},
            now=clock.now(),
        )
        current = await store.approvals.get(ticket.approval.id)
        if ok:
            await self.effects.mark(current, Status.EXECUTED)
        elif current.status is Status.EXECUTING:
            try:
                await store.approvals.transition(
                    current.id,
                    target=Status.FAILED,
                    expected_version=current.version,
                    actor=self.worker_id,
                    now=clock.now(),
                    reason=detail[:500],
                )
            except (StaleVersion, IllegalTransition):
                pass

    def receipted_when_allowed(self, ticket: Ticket) -> bool:
        """Whether ``ticket``, a call that runs without a person, gets a receipt (its tool's receipts come
        ``always``): only then has :meth:`begin` anything to do for it."""
        receipts = self.service.receipts
        return receipts is not None and ticket.approval is None and receipts.covers(ticket.call.tool)

    async def _allowed_receipt(self, ticket: Ticket) -> str | None:
        """The receipt of a call that runs without a person, when its tool's receipts come ``always`` (None
        otherwise); raises when it cannot be had, so the call does not run."""
        receipts = self.service.receipts
        if receipts is None or not self.receipted_when_allowed(ticket):
            return None
        call = ticket.call
        allowed = AllowedCall(
            call.tool,
            dict(ticket.args),
            session=call.session,
            requester=call.requester or self.service.requester,
            scope=ticket.scope or f"{call.framework}:{call.session}:{call.call_id or '-'}",
            basis=Basis.TRUST if ticket.allowed_by == "trust" else Basis.POLICY,
        )
        return await receipts.allowed(allowed)

    def _bound(self, ticket: Ticket, args: Mapping[str, Any] | None) -> dict[str, Any]:
        if args is None:
            return dict(ticket.args)
        given = dict(normalize(dict(args)))
        if not identical(given, normalize(dict(ticket.args))):
            raise GateRefused(
                f"{ticket.call.tool} was about to run with arguments other than the approved ones; nothing ran",
                code=ErrorCode.HASH_MISMATCH,
            )
        return given


def _names_key(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` has a parameter named ``idempotency_key``."""
    return _names(fn, "idempotency_key")


def _names(fn: Callable[..., Any], parameter: str) -> bool:
    """Whether ``fn`` has a parameter named ``parameter`` (read from its code object when it has one: this runs on
    every allowed call, and ``inspect.signature`` costs more than the rest of the gate)."""
    code = getattr(fn, "__code__", None)
    if code is not None and not hasattr(fn, "__wrapped__") and not isinstance(fn, functools.partial):
        return parameter in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return parameter in inspect.signature(fn).parameters


def _kwargs_call(fn: Callable[..., Any], receiver: str | None) -> Callable[..., Awaitable[Any]]:
    """``fn(**args)`` as a coroutine function that names ``idempotency_key`` and :data:`_RECEIPT_KW` (so the ledger's
    Tool hands the key and the receipt over as those keywords, never as tool arguments through a ``**args`` closure;
    the receipt reaches ``fn`` as ``receiver``). A sync ``fn`` runs in a thread, as the runner runs sync tools, so a
    slow effect does not stall the agent's event loop."""

    wants_key = _names_key(fn)

    async def call(idempotency_key: str = "", _hitl_receipt: str | None = None, **args: Any) -> Any:
        if wants_key:
            args["idempotency_key"] = idempotency_key
        if receiver is not None:
            args[receiver] = _hitl_receipt
        running = _RUNNING_RECEIPT.set(_hitl_receipt)  # a sync fn's thread copies this context
        try:
            return await _invoke(fn, args)
        finally:
            _RUNNING_RECEIPT.reset(running)

    return call


async def _invoke(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """``fn(**args)``, awaited; a sync ``fn`` in a thread."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**args)
    out = await asyncio.to_thread(fn, **args)
    return await out if inspect.isawaitable(out) else out
