"""Admission guards: what may refuse, or change, what the service admits, in a declared order.

A :class:`ProposalGuard` sees a proposed call after its tool name and arguments were made plain and before the
policy counts it or an approval exists; a :class:`DecisionGuard` sees a decision before the store's atomic step.
A guard refuses by raising a coded error, after auditing the refusal. The service runs its guards in the order of
its lists (:data:`PROPOSAL_GUARDS`, :data:`DECISION_GUARDS` by default): the argument schemas, then the stop
switch; a decision meets the stop switch, then the practice rule. Flood caps, delegation, typed confirmation and
receipts register here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from hitl.engine.domain.arg_schema import CompiledSchema, validate_args
from hitl.engine.domain.halts import acted_on, covering
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.oversight.stop_switch import StopSwitch, halted
from hitl.engine.receipts.claims import receipt_problem

if TYPE_CHECKING:
    from hitl.engine.ports import Store
    from hitl.engine.receipts.ports import ReceiptClaims

__all__ = [
    "DECISION_GUARDS",
    "GOING_ON",
    "PROPOSAL_GUARDS",
    "Admission",
    "ArgumentSchemas",
    "DecisionAttempt",
    "DecisionGuard",
    "GuardedService",
    "Order",
    "HaltedDecisions",
    "HaltedProposals",
    "PracticeEdits",
    "ProposalGuard",
    "ReceiptableArguments",
    "admission_order",
]

GOING_ON = frozenset({DecisionKind.APPROVE, DecisionKind.MODIFY, DecisionKind.TRUST})
"""Decisions that let an action run: refused while the stop switch covers its tool (rejecting still works)."""


class GuardedService(Protocol):
    """What a guard may use of the service that runs it."""

    store: Store
    switch: StopSwitch
    """The stop switch: no proposal, approval or execution of a halted tool goes through."""
    receipts: ReceiptClaims | None
    """The receipts ``hitl.yaml`` asks for (None: none)."""

    async def record_refusal(self, approval_id: str, actor: str, code: ErrorCode | str, detail: str) -> None:
        """Audit a refusal made outside the store's atomic step."""
        ...


@dataclass(slots=True)
class Admission:
    """A proposed call as the guards see it: its arguments plain, nothing counted or stored yet."""

    request: ProposeRequest
    items: list[dict[str, Any]]
    """One item, or a batch's items in order."""
    schema: CompiledSchema | None
    """The JSON Schema sent with the call, compiled."""
    declared: CompiledSchema | None
    """``hitl.yaml``'s schema for the tool, compiled."""
    requester: str
    now: float

    def refused(self, code: ErrorCode, detail: str, *, item: dict[str, Any] | None = None) -> AuditEntry:
        """The audit entry of a refusal of this call."""
        return AuditEntry(
            at=self.now,
            actor=self.requester[:200],
            event="refused",
            action_hash=action_hash(self.request.tool, item) if item is not None else None,
            outcome=str(code),
            detail=f"{self.request.session_id}: {self.request.tool}{detail}"[:500],
        )


class ProposalGuard(Protocol):
    """May refuse a proposed call (audited) before anything is counted or stored. A guard may also have a
    ``passes(admission, service) -> bool`` method, asked first without awaiting anything: True lets the call on
    at once (most calls satisfy their schemas and meet no halt: they cost those guards no coroutine)."""

    async def admit(self, admission: Admission, service: GuardedService) -> None:
        """Return to let the call on; raise a coded error to refuse it."""
        ...


Order = tuple[tuple[ProposalGuard, Callable[[Admission, GuardedService], bool] | None], ...]
"""The proposal guards in order, each with its ``passes`` (None: it is always awaited)."""


def admission_order(guards: Sequence[ProposalGuard]) -> Order:
    """``guards`` with their ``passes`` looked up once per list, not on every call."""
    return tuple((g, getattr(g, "passes", None)) for g in guards)


@dataclass
class DecisionAttempt:
    """A decision as the guards see it, before the store's atomic step. A guard may replace the request."""

    request: DecideRequest
    reviewer: Reviewer
    known: Approval | None
    """The approval as the caller or a guard read it (None: not read yet; the atomic step checks it anyway)."""
    store: Store = field(repr=False)
    """Where :meth:`current` reads it."""

    async def current(self) -> Approval:
        """The approval decided, read once."""
        if self.known is None or self.known.id != self.request.approval_id:
            self.known = await self.store.approvals.get(self.request.approval_id)
        return self.known


class DecisionGuard(Protocol):
    """May refuse a decision (audited) or change what it decides, before the store's atomic step."""

    async def admit(self, attempt: DecisionAttempt, service: GuardedService) -> None:
        """Return to let the decision on (``attempt.request`` may be replaced); raise a coded error to refuse."""
        ...


class ArgumentSchemas:
    """Nothing unchecked enters: every item satisfies the tool's schema declared in ``hitl.yaml`` and the one sent
    with the call. A refusal names every bad field."""

    def passes(self, admission: Admission, service: GuardedService) -> bool:
        """Every item satisfies both schemas (checked without collecting errors)."""
        for checked in (admission.declared, admission.schema):
            if checked is not None:
                for item in admission.items:
                    if not checked.is_valid(item):
                        return False
        return True

    async def admit(self, admission: Admission, service: GuardedService) -> None:
        items, tool = admission.items, admission.request.tool
        for source, checked in (("hitl.yaml", admission.declared), ("the call", admission.schema)):
            if checked is None:
                continue
            for i, item in enumerate(items):
                if checked.is_valid(item):  # the common case, without collecting errors
                    continue
                try:
                    validate_args(tool, checked.schema, item, checked)
                except InvalidInput as exc:
                    where = f" (item {i + 1})" if len(items) > 1 else ""
                    detail = f"{where} refused by the schema of {source}: {exc.message}"
                    await service.store.audit.append(admission.refused(ErrorCode.INVALID_INPUT, detail, item=item))
                    raise InvalidInput(
                        f"{exc.message} (checked against the schema of {source}; nothing was proposed)",
                        tool=tool,
                        fields=exc.context.get("fields", {}),
                    ) from None


class HaltedProposals:
    """The stop switch: a halted tool's call is refused before anything is counted or stored."""

    def passes(self, admission: Admission, service: GuardedService) -> bool:
        """The switch's orders, read less than half a second ago, hold none (nothing to await)."""
        return service.switch.clear()

    async def admit(self, admission: Admission, service: GuardedService) -> None:
        tool = admission.request.tool
        order = await service.switch.covering(tool)
        if order is None:
            return
        refusal = halted(order, tool)
        item = admission.items[0] if len(admission.items) == 1 else None
        await service.store.audit.append(admission.refused(ErrorCode.HALTED, f": {refusal.message}", item=item))
        raise refusal


class ReceiptableArguments:
    """With receipts asked for, arguments a receipt could not bind (outside what RFC 8785 encodes) are refused
    before an approval exists: a person would otherwise approve a call nothing could ever let run."""

    def passes(self, admission: Admission, service: GuardedService) -> bool:
        """No receipts asked for (the common case): nothing to check."""
        return service.receipts is None

    async def admit(self, admission: Admission, service: GuardedService) -> None:
        for i, item in enumerate(admission.items):
            problem = receipt_problem(item)
            if problem is None:
                continue
            where = f" (item {i + 1})" if len(admission.items) > 1 else ""
            detail = f"{where}: {problem}"
            await service.store.audit.append(admission.refused(ErrorCode.INVALID_INPUT, detail, item=item))
            raise InvalidInput(
                f"{problem}; a receipt could not bind them, so nothing was proposed", tool=admission.request.tool
            )


class HaltedDecisions:
    """Halted tools are not approved (rejecting still works); a spot check, which runs nothing, is answered."""

    async def admit(self, attempt: DecisionAttempt, service: GuardedService) -> None:
        request = attempt.request
        if request.kind not in GOING_ON:
            return
        halts = await service.switch.orders_now()
        if not halts:
            return
        current = await attempt.current()
        order = None if is_spot_check(current) else covering(halts, acted_on(current))
        if order is not None:
            refusal = halted(order, current.tool)
            detail = f"{request.kind} via {request.via}: {refusal.message}"
            await service.record_refusal(request.approval_id, attempt.reviewer.id, ErrorCode.HALTED, detail)
            raise refusal


class PracticeEdits:
    """An edit of a practice approval caught its defect: recorded as a rejection, so no edited twin is made."""

    async def admit(self, attempt: DecisionAttempt, service: GuardedService) -> None:
        request = attempt.request
        if request.kind is DecisionKind.MODIFY and is_practice(await attempt.current()):
            attempt.request = replace(request, kind=DecisionKind.REJECT, args=None, reason=request.reason or "edited")


PROPOSAL_GUARDS: Sequence[ProposalGuard] = (ArgumentSchemas(), ReceiptableArguments(), HaltedProposals())
"""The guards every proposal meets, in order."""
DECISION_GUARDS: Sequence[DecisionGuard] = (HaltedDecisions(), PracticeEdits())
"""The guards every decision meets, in order."""
