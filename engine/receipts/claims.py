"""Receipts, as the engine issues and spends them. Pure: no I/O, no keys (signing is the port
:class:`~hitl.engine.receipts.ports.ReceiptSigner`'s, done by ``hitl serve`` alone).

A receipt is issued at an execution attempt, recorded in the execution claim's own atomic step (an attempt that is
refused issues nothing), and spent once when the protected system redeems it. Its ``args_sha256`` is the SHA-256
of the RFC 8785 canonical JSON of the exact arguments that run: a verifier reproduces it with any RFC 8785 library,
which the action hash (hitl's own canonical form, with the tool's name) would not allow.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import rfc8785

from hitl.engine.domain.models import Approval, ApprovalKind, DecisionKind, Tier
from hitl.engine.domain.records import AuditEntry, Claim, Issued
from hitl.engine.errors import EngineError, ErrorCode

__all__ = [
    "LEEWAY",
    "Basis",
    "AUTHORIZATION_TYPE",
    "ISSUED_EVENT",
    "UNSIGNED_EVENT",
    "AllowedCall",
    "Issued",
    "ReceiptStatus",
    "Receipted",
    "Redemption",
    "Withdrawal",
    "allowed_claims",
    "approval_of",
    "issued_entry",
    "unsigned_entry",
    "receipt_claims",
    "receipt_digest",
    "receipt_problem",
    "view_digests",
    "withdrawn_refusal",
]

LEEWAY = 30.0
"""Seconds past a receipt's ``exp`` its record is kept (what a verifier's clock may be behind), then purged."""

AUTHORIZATION_TYPE = "urn:hitl:approval"
"""The ``type`` of the RAR (RFC 9396) ``authorization_details`` entry a receipt carries when ``receipts:`` asks for
it: the call (``tool``, ``args_sha256``) and what each approver was shown (``view_digests``)."""


class Basis(StrEnum):
    """Why the call may run: a person approved it, the person the agent acts for confirmed it (tier ``self``), a
    reviewer's Trust covers it, or the policy allows it."""

    APPROVAL = "approval"
    SELF = "self"
    TRUST = "trust"
    POLICY = "policy"


@dataclass(frozen=True)
class Receipted:
    """An execution claim, and the receipt issued in its atomic step (None unless the claim was acquired for a new
    attempt)."""

    claim: Claim
    receipt: str | None = None
    handed_over: bool = False
    """Whether the claim's own step also moved the approval to ``executing`` for the claim's holder (``hitl
    serve``'s, claiming for another process): the holder does not move it again."""


@dataclass(frozen=True)
class AllowedCall:
    """A call that runs without a person (the policy allows it, or a reviewer's Trust covers it), of a tool whose
    receipts ``always`` come: what its receipt is issued for."""

    tool: str
    args: dict[str, Any]
    session: str
    requester: str
    scope: str
    """The proposal's dedupe scope (the gate's ``framework:session:call id``): with the requester and the arguments,
    it names this call (its receipt's ``sub``)."""
    basis: Basis


class Redemption(StrEnum):
    """What redeeming a receipt found."""

    FIRST = "first"
    """Spent now: the protected system may act."""
    AGAIN = "again"
    """Spent before under the same redemption id: the same use asked again (a retry); act as the first time said."""
    SPENT = "spent"
    """Spent before by another use (or with no redemption id): refuse."""
    UNKNOWN = "unknown"
    """Never issued here, or purged after it expired: refuse."""
    WITHDRAWN = "withdrawn"
    """Its approval was withdrawn before any of its receipts was spent: refuse."""


class Withdrawal(StrEnum):
    """What withdrawing an approval found, decided in the same atomic step a redeem of its receipt takes."""

    WITHDRAWN = "withdrawn"
    """Withdrawn now: none of its receipts will be redeemed."""
    ALREADY = "already"
    """Withdrawn before: nothing changed."""
    SPENT = "spent"
    """A receipt of it was spent first: too late, the protected system may have acted."""


class ReceiptStatus(StrEnum):
    """What introspecting a receipt says of it now."""

    ACTIVE = "active"
    """Issued, unspent, unexpired, its approval not withdrawn: a redeem would spend it."""
    CONSUMED = "consumed"
    """Spent."""
    WITHDRAWN = "withdrawn"
    """Its approval was withdrawn before it was spent."""
    EXPIRED = "expired"
    """Past its ``exp`` (or its record is gone with it)."""


ISSUED_EVENT = "receipt_issued"
"""The audit event of a receipt's issue for an approval (its detail starts with ``receipt <jti>``): what keeps the
``jti`` once the receipt's own record is purged, for the approval's evidence record."""


def issued_entry(approval: Approval, jti: str, *, actor: str, now: float) -> AuditEntry:
    """The audit entry of the receipt ``jti`` issued for an execution of ``approval``, written before the receipt
    is handed out: by the claim's atomic step, with the receipt's record (:attr:`Issued.audit`)."""
    return AuditEntry(
        at=now,
        actor=actor,
        event=ISSUED_EVENT,
        approval_id=approval.id,
        version=approval.version,
        action_hash=approval.action_hash,
        detail=f"receipt {jti} for {approval.tool}",
    )


UNSIGNED_EVENT = "receipt_unsigned"
"""The audit event of a receipt recorded with its claim that could not be signed (its detail starts with
``receipt <jti>``): it was never handed out, nothing ran under its attempt, and no evidence record names it."""


def unsigned_entry(approval: Approval, jti: str, *, actor: str, now: float, why: str) -> AuditEntry:
    """The audit entry of the receipt ``jti`` whose issue its claim recorded (:func:`issued_entry`) but which
    could not be signed: its attempt is recorded as failed, and nothing ran under it."""
    detail = f"receipt {jti} for {approval.tool}: never handed out, {why}"
    return issued_entry(approval, jti, actor=actor, now=now).model_copy(
        update={"event": UNSIGNED_EVENT, "outcome": str(ErrorCode.RECEIPT_UNAVAILABLE), "detail": detail}
    )


def withdrawn_refusal(approval_id: str) -> EngineError:
    """What a claim with a receipt of ``approval_id`` meets once it was withdrawn (``action_rejected``): a receipt
    issued after the withdrawal would pass a protected system that checks receipts offline only, and nothing may
    run by a withdrawn approval. The stores raise it from the claim's own atomic step, before it writes anything."""
    return EngineError(
        f"{approval_id} was withdrawn: nothing runs by it, and no receipt of it is issued; ask for a new approval "
        "if the action must still happen",
        code=ErrorCode.ACTION_REJECTED,
        approval_id=approval_id,
    )


def approval_of(sub: str) -> str:
    """The approval a receipt's ``sub`` names (a batch item's ``sub`` is the approval's id, ``#`` and the index):
    what a withdrawal and a redeem of its receipts decide on together."""
    return sub.split("#", 1)[0]


def receipt_digest(args: dict[str, Any]) -> str:
    """The ``args_sha256`` claim: base64url (no padding) SHA-256 of the arguments' RFC 8785 canonical JSON;
    :class:`ValueError` for arguments RFC 8785 cannot encode.

    ``hitl.receipts.args_sha256`` is its twin on the verifying side, kept apart on purpose: a service that only
    verifies loads none of the engine (the engine may not import the composition root either). The protected
    service's test checks the two agree on every receipt it pays."""
    try:
        canonical = rfc8785.dumps(args)
    except rfc8785.CanonicalizationError as exc:
        raise ValueError(f"the arguments cannot be put in RFC 8785 canonical JSON: {exc}") from None
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode("ascii")


def receipt_problem(args: dict[str, Any]) -> str | None:
    """Why ``args`` could never get a receipt (None when they can): refused when proposed, before an approval."""
    try:
        receipt_digest(args)
    except ValueError as exc:
        return str(exc)
    return None


def receipt_claims(
    approval: Approval,
    *,
    args: dict[str, Any],
    issuer: str,
    now: float,
    ttl: float,
    audience: str | None = None,
    jti: str | None = None,
    index: int | None = None,
    authorization_details: bool = False,
) -> dict[str, Any]:
    """The claims of the receipt for one execution of ``approval`` with ``args`` (the ones that run, an edit
    included); ``index``: a batch's item (its ``sub`` is the approval's id, ``#`` and the index). Only an action's
    approval gets one: a practice copy, a spot check, a question is never executed.

    ``view_digests`` names, per approver, the digest of the view they decided on (None: they were shown none);
    ``authorization_details`` adds the same as a RAR entry of type :data:`AUTHORIZATION_TYPE`."""
    if approval.kind is not ApprovalKind.ACTION:
        raise ValueError(f"{approval.id} is a {approval.kind} approval: nothing runs by it, so it gets no receipt")
    # A Trust on this approval approved this call too (basis approval); the later calls it covers are `trust`.
    claims = _claims(
        approval.tool,
        args,
        sub=approval.id if index is None else f"{approval.id}#{index}",
        basis=Basis.SELF if approval.tier is Tier.SELF else Basis.APPROVAL,
        approvers=list(dict.fromkeys(approval.approvers)),
        requester=approval.requester,
        issuer=issuer,
        now=now,
        ttl=ttl,
        audience=audience,
        jti=jti,
    )
    claims["view_digests"] = view_digests(approval)
    if authorization_details:
        entry = {"type": AUTHORIZATION_TYPE, "actions": ["execute"], "tool": approval.tool}
        entry |= {"args_sha256": claims["args_sha256"], "view_digests": claims["view_digests"]}
        claims["authorization_details"] = [entry]
    will_happen = approval.will_happen  # after a Modify: the one computed for the edited arguments, what runs
    if will_happen is not None:  # what would happen, by its RFC 8785 digest
        claims["consequence_sha256"] = will_happen.digest()
    return claims


def view_digests(approval: Approval) -> dict[str, str | None]:
    """Approver -> the ``view_digest`` of the view their approving decision was made on (their last one: a Modify
    after an Approve is what they approved last); None for an approver shown no view."""
    approving = {DecisionKind.APPROVE, DecisionKind.TRUST, DecisionKind.MODIFY}
    seen: dict[str, str | None] = {}
    for decision in approval.decisions:
        if decision.kind in approving:
            seen[decision.reviewer] = decision.view_digest
    return seen


def allowed_claims(
    call: AllowedCall, *, subject: str, issuer: str, now: float, ttl: float, audience: str | None = None
) -> dict[str, Any]:
    """The claims of the receipt for a call that runs without a person (``basis`` ``policy`` or ``trust``): nobody
    approved it (``approvers`` is empty); ``subject`` names the call."""
    return _claims(
        call.tool,
        call.args,
        sub=subject,
        basis=call.basis,
        approvers=[],
        requester=call.requester,
        issuer=issuer,
        now=now,
        ttl=ttl,
        audience=audience,
    )


def _claims(
    tool: str,
    args: dict[str, Any],
    *,
    sub: str,
    basis: Basis,
    approvers: list[str],
    requester: str,
    issuer: str,
    now: float,
    ttl: float,
    audience: str | None,
    jti: str | None = None,
) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": sub,
        "jti": jti or f"rct_{secrets.token_urlsafe(16)}",
        "iat": int(now),
        "exp": int(now + ttl),
        "tool": tool,
        "args_sha256": receipt_digest(args),
        "basis": str(basis),
        "approvers": approvers,
        "requester": requester,
    }
    if audience is not None:
        claims["aud"] = audience
    return claims
