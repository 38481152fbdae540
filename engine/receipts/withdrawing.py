"""Withdrawing an approval whose receipts are unspent: by one of its deciders or an admin, with a reason, audited in
its trail after the store's atomic step (:meth:`~hitl.engine.receipts.ports.ReceiptLedger.withdraw`) decided it.
Every surface (the API, the card, the CLI) withdraws through :func:`withdraw_approval`.

A withdrawal binds only relying parties that redeem or introspect a receipt: one that only verifies its signature
offline cannot know of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hitl.engine.domain.models import Approval, ApprovalKind, Status, Tier
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.receipts.claims import Withdrawal

if TYPE_CHECKING:  # the ports load the decision rules; the API's models read REASON_MAX here, `hitl withdraw` too
    from hitl.engine.ports import Clock, Store

__all__ = ["WITHDRAWABLE", "WithdrawRequest", "may_withdraw", "within_roles", "withdraw_approval"]

WITHDRAWABLE = frozenset({Status.APPROVED, Status.EXECUTING, Status.EXECUTED, Status.FAILED})
"""The states in which an approval may have a receipt out (issued at an execution attempt), so may be withdrawn."""

REASON_MAX = 500
"""The longest reason a withdrawal keeps (its audit line)."""


@dataclass(frozen=True)
class WithdrawRequest:
    """Who withdraws which approval, through what, and why."""

    approval_id: str
    actor: str
    """The person (a reviewer id) or the token's identity that withdraws."""
    via: str
    """The surface: ``slack``, ``cli``, ``api:<token>``."""
    reason: str
    admin: bool = False
    """Whether the actor holds the ``admin`` scope (any approval), or must be one of its deciders."""
    roles: frozenset[str] | None = None
    """The roles the actor's credential is limited to (an API token's ``roles``), None when it is not: an approval
    outside them is refused as deciding it would be, admin or decider alike."""


def may_withdraw(approval: Approval, actor: str, *, admin: bool = False) -> bool:
    """Whether ``actor`` may withdraw ``approval`` now: an action's approval that may have a receipt out, and the
    actor one of its deciders (or an admin). The card shows its control by this too."""
    if approval.kind is not ApprovalKind.ACTION or approval.status not in WITHDRAWABLE:
        return False
    return admin or any(actor in d.voters for d in approval.decisions)


def within_roles(approval: Approval, actor: str, roles: frozenset[str] | None, now: float) -> bool:
    """Whether a credential limited to ``roles`` reaches ``approval``, by the rule that lets it decide one: its
    required role (any role when none is named), its backup role once handed on; a ``self`` approval is its
    person's, whatever the roles. Not limited (None): it reaches every approval."""
    if roles is None or (approval.tier is Tier.SELF and actor == approval.on_behalf_of):
        return True
    if approval.required_role is None:
        return bool(roles)
    return approval.required_role in roles or (approval.handed_on(now) and approval.backup_role in roles)


async def withdraw_approval(store: Store, clock: Clock, request: WithdrawRequest) -> Approval:
    """Withdraw the approval ``request`` names (the store's one atomic step decides it against any redeem of its
    receipts), then audit it. Raises :class:`EngineError`: ``not_found``, ``not_eligible`` (not a decider),
    ``illegal_transition`` (nothing of it can be out), ``receipt_spent`` (too late); a refusal is audited too."""
    reason = request.reason.strip()
    if not reason or len(reason) > REASON_MAX or any(ord(c) < 32 and c not in "\n\t" for c in reason):
        raise EngineError(
            f"a withdrawal needs a reason of 1 to {REASON_MAX} characters, without control characters; "
            "say why it must not be acted on",
            code=ErrorCode.INVALID_INPUT,
            approval_id=request.approval_id,
        )
    approval = await store.approvals.get(request.approval_id)
    now = clock.now()
    refusal: EngineError | None = None
    if approval.kind is not ApprovalKind.ACTION or approval.status not in WITHDRAWABLE:
        refusal = EngineError(
            f"{approval.id} is {approval.status}: no receipt of it can be out, so there is nothing to withdraw "
            "(a pending approval is rejected instead)",
            code=ErrorCode.ILLEGAL_TRANSITION,
            approval_id=approval.id,
        )
    elif not may_withdraw(approval, request.actor, admin=request.admin):
        refusal = EngineError(
            f"only a decider of {approval.id} or an admin token may withdraw it; ask one of them",
            code=ErrorCode.NOT_ELIGIBLE,
            approval_id=approval.id,
        )
    elif not within_roles(approval, request.actor, request.roles, now):
        # A role-narrowed token reaches no further when it takes an approval back than when it gives one.
        refusal = EngineError(
            f"this credential is limited to the roles {', '.join(sorted(request.roles or ())) or '(none)'}, and "
            f"{approval.id} is for {approval.required_role or 'any role'}: withdraw it with a token that holds it",
            code=ErrorCode.NOT_ELIGIBLE,
            approval_id=approval.id,
        )
    elif await store.receipts.withdraw(approval.id, now=now) is Withdrawal.SPENT:
        refusal = EngineError(
            f"a receipt of {approval.id} was spent before this withdrawal: the protected system may have acted on "
            "it, so it was not withdrawn; look at its audit trail and undo the action there",
            code=ErrorCode.RECEIPT_SPENT,
            approval_id=approval.id,
        )
    entry = AuditEntry(
        at=now,
        actor=request.actor,
        event="refused" if refusal is not None else "withdrawn",
        approval_id=approval.id,
        version=approval.version,
        action_hash=approval.action_hash,
        outcome=str(refusal.code) if refusal is not None else "ok",
        detail=f"withdrawal via {request.via}: {reason}",
    )
    await store.audit.append(entry)
    if refusal is not None:
        raise refusal
    return approval
