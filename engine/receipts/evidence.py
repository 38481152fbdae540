"""The durable evidence of an executed approval: what an auditor keeps and verifies offline, long after the receipt
expired. Pure: its claims come from the approval (the call, its deciders and their decisions) and its audit trail
(the receipts issued for it); ``hitl serve`` signs them (``typ: hitl-evidence+jwt``, no ``exp``), and the key that
did stays published at the keys history (``/.well-known/jwks-history.json``) after it is rotated out.

The receipt's ``jti`` is in the trail because its issue is audited before the receipt is handed out
(:func:`~hitl.engine.receipts.claims.issued_entry`); one that could not be signed was never handed out
(:func:`~hitl.engine.receipts.claims.unsigned_entry`), and is left out."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from hitl.engine.domain.models import Approval, ApprovalKind, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.receipts.claims import ISSUED_EVENT, UNSIGNED_EVENT, receipt_digest

__all__ = ["EVIDENCE_TYPE", "evidence_claims", "evidence_problem"]

EVIDENCE_TYPE = "hitl-evidence+jwt"
"""The ``typ`` header of an evidence record (never a receipt's: a verifier of one refuses the other)."""
_ISSUED = re.compile(r"^receipt (rct_[A-Za-z0-9_-]{1,64})\b")


def evidence_problem(approval: Approval) -> str | None:
    """Why ``approval`` has no evidence record (None when it has one): only an action's approval that ran."""
    if approval.kind is not ApprovalKind.ACTION:
        return f"{approval.id} is a {approval.kind} approval: nothing ran by it"
    if approval.status is not Status.EXECUTED:
        return f"{approval.id} is {approval.status}, not executed: the evidence record is of an approval that ran"
    return None


def evidence_claims(approval: Approval, trail: Iterable[AuditEntry], *, issuer: str, now: float) -> dict[str, Any]:
    """The claims of ``approval``'s evidence record: the call (``tool``, ``args_sha256`` of what ran), each
    decision (who, what, when, on which view), when it ran, and the ``jti`` of each receipt issued for it. No
    ``exp``: it is a record, not a permission. ``ValueError`` when it has none (:func:`evidence_problem`)."""
    problem = evidence_problem(approval)
    if problem is not None:
        raise ValueError(problem)
    entries = [e for e in trail if e.approval_id == approval.id]
    unsigned = {m.group(1) for e in entries if e.event == UNSIGNED_EVENT and (m := _ISSUED.match(e.detail))}
    receipts = [
        m.group(1)
        for e in entries
        if e.event == ISSUED_EVENT and (m := _ISSUED.match(e.detail)) and m.group(1) not in unsigned
    ]
    executed = [e.at for e in entries if e.event == "executed"] or [approval.updated_at]
    return {
        "iss": issuer,
        "sub": approval.id,
        "jti": f"evd_{approval.id}",
        "iat": int(now),
        "tool": approval.tool,
        "args_sha256": receipt_digest(dict(approval.execute_args)),
        "requester": approval.requester,
        "deciders": [
            {
                "id": d.reviewer,
                "decision": str(d.kind),
                "at": d.at,
                "view_digest": d.view_digest,
                **({"acting_for": d.acting_for} if d.acting_for else {}),
            }
            for d in approval.decisions
        ],
        "decided_at": [d.at for d in approval.decisions],
        "executed_at": executed[-1],
        "receipts": list(dict.fromkeys(receipts)),
    }
