"""Shared encoding helpers for the stores."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from hitl.engine.domain.delegation import Delegation, ended_text, given_text
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval
from hitl.engine.domain.ranking import rank_key
from hitl.engine.domain.records import AuditEntry, Claim, TrustGrant
from hitl.engine.errors import InvalidInput

__all__ = [
    "APPROVAL_COLUMNS",
    "CLAIM_COLUMNS",
    "approval_doc",
    "approval_row",
    "audit_for_creation",
    "AUDIT_COLUMNS",
    "audit_entry",
    "audit_for_decision",
    "audit_for_delegation",
    "audit_for_delegation_end",
    "audit_for_grant",
    "audit_for_halt",
    "audit_for_revocation",
    "audit_values",
    "claim_of",
    "claim_row",
    "decode_cursor",
    "decode_rank_cursor",
    "dumps",
    "encode_cursor",
    "encode_rank_cursor",
    "encode_json_form",
    "grant_of",
    "loads",
    "reviewer_rows",
]

CLAIM_COLUMNS = "action_hash, holder, attempt, state, lease_until, result"
"""A claim's columns (after its key), in the order :func:`claim_of` reads and :func:`claim_row` writes them."""


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept as it is (the form records are stored in)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_json_form(value: Any) -> str:
    """Compact JSON of a value already in JSON form, as pydantic's JSON mode leaves it (string keys; no NaN or
    infinity: they became null): a run's checkpoint, or a list of strings a script decodes. Encoded by orjson, ~10x
    faster than :func:`dumps` on a checkpoint (written on every step boundary), to the same JSON value; a value
    orjson refuses (an integer beyond 64 bits) is encoded by :func:`dumps`."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return dumps(value)


def loads(text: str | bytes) -> Any:
    """A stored JSON value."""
    return json.loads(text)


APPROVAL_COLUMNS = (
    "id, status, version, created_at, expires_at, required_role, requester, rank, backup_role, hand_on_at, tool, tier, "
    "doc"
)
"""The columns of an approval's row in the SQL stores, in :func:`approval_row`'s order. ``tool`` and ``tier`` never
change after creation: they are written here and by no ``UPDATE``, so a decide or a move rewrites none of their
indexes' entries (as expressions over the document, every ``UPDATE`` of it did: two WAL pages a SQLite decide)."""


def approval_doc(a: Approval) -> str:
    """An approval's JSON document in the SQL stores, without the fields that are None by default and still None:
    the approval's own and those of the models it holds (its decisions, its consequence). Every field of those
    models that can be None defaults to None (``tests/storage/test_bytes_per_run.py`` pins it), so each reads back
    as the None it was; a None inside ``args`` or ``metadata`` is data and is kept (pydantic leaves out model
    fields only).

    Why: the row of a plain approval is ~1.35 kB, three to a 4 KiB SQLite page with ~30 B to spare; the nulls of
    fields added since (``supersedes``, ``consequence``) tipped it to two a page, a third of each page empty (+683 B
    a finished run, with no consequence declared). The nine nulls a plain approval carries are ~160 B; left out, the
    row fits three a page with room. A decision's five nulls (~80 B: ``reason``, ``args``, ``acting_for``,
    ``consequence``, ``view_digest``) were half of what a decide adds to a row packed that tightly: with them, the
    row outgrew its page on most decides (a rebalance, +0.6 page written a sequential decide on the store
    benchmark). No query reads these fields out of the document (SQL's missing and null read alike), and Redis's
    static document already leaves out every default."""
    return a.model_dump_json(exclude_none=True)


def approval_row(a: Approval, doc: str) -> tuple[Any, ...]:
    """A new approval's row in the SQL stores (:data:`APPROVAL_COLUMNS`): its indexed fields beside its JSON."""
    fixed = (a.id, str(a.status), a.version, a.created_at, a.expires_at, a.required_role, a.requester)
    return (*fixed, rank_key(a), a.backup_role, a.hand_on_at, a.tool, str(a.tier), doc)


def reviewer_rows(a: Approval) -> list[tuple[str, float, str]]:
    """The rows of the SQL stores' index of who decided what (``approval_reviewers``: reviewer, the approval's
    creation time, its id) for every decision or vote ``a`` holds, each reviewer once. A decide writes its own
    decision's row (:attr:`~hitl.engine.storage.decisions.DecisionWrites.reviewer`); this covers an approval
    inserted with decisions already on it."""
    return [(reviewer, a.created_at, a.id) for reviewer in dict.fromkeys(d.reviewer for d in a.decisions)]


def encode_cursor(created_at: float, approval_id: str) -> str:
    """A page cursor: the last item's creation time and id."""
    return f"{created_at!r}|{approval_id}"


_K = TypeVar("_K")


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    """The creation time and id a cursor names; None for the first page."""
    return _decoded(cursor, ranked=False, key=float)


def encode_rank_cursor(rank: int, approval_id: str) -> str:
    """A ranked page's cursor: the last item's rank and id (``r`` first, so it is never read as another order's)."""
    return f"r{rank}|{approval_id}"


def decode_rank_cursor(cursor: str | None) -> tuple[int, str] | None:
    """The rank and id a ranked page's cursor names; None for the first page."""
    return _decoded(cursor, ranked=True, key=int)


def _decoded(cursor: str | None, *, ranked: bool, key: Callable[[str], _K]) -> tuple[_K, str] | None:
    """The key and id ``cursor`` names, if it is a cursor of the order asked for (``ranked``: ``r`` first)."""
    if not cursor:
        return None
    at, _, aid = cursor.partition("|")
    try:
        if at.startswith("r") != ranked:
            raise ValueError("another order's cursor")
        return key(at[1:] if ranked else at), aid
    except ValueError:
        raise InvalidInput(
            f"malformed page cursor {cursor!r}; pass the cursor a previous page in the same order returned"
        ) from None


def audit_for_decision(
    approval: Approval, *, actor: str, event: str, now: float, outcome: str = "ok", detail: str = ""
) -> AuditEntry:
    """The audit entry of a decision (or its refusal) on ``approval``, at its new version."""
    return AuditEntry(
        at=now,
        actor=actor,
        event=event,
        approval_id=approval.id,
        version=approval.version,
        action_hash=approval.action_hash,
        outcome=outcome,
        detail=detail[:500],
    )


def audit_for_creation(approval: Approval) -> AuditEntry:
    """The ``created`` entry: the tool and tier, and which framework, agent and session asked (so the audit log
    alone says where an action came from)."""
    asked = f" via {approval.asked_by}" if approval.asked_by else ""
    return audit_for_decision(
        approval,
        actor=approval.requester,
        event="created",
        now=approval.created_at,
        detail=f"{approval.tool} {approval.tier}{asked}",
    )


def audit_for_grant(grant: TrustGrant, *, now: float) -> AuditEntry:
    """The ``trust_granted`` entry of ``grant``: the tool, for whom, in which session."""
    detail = f"{grant.tool} for {grant.requester} in {grant.session_id}"
    return AuditEntry(at=now, actor=grant.granted_by, event="trust_granted", detail=detail)


def audit_for_revocation(session_id: str, tool: str, *, requester: str | None, by: str, now: float) -> AuditEntry:
    """The ``trust_revoked`` entry of ``tool``'s grants in ``session_id`` (``requester``'s alone, when named)."""
    who = f" for {requester}" if requester is not None else ""
    return AuditEntry(at=now, actor=by, event="trust_revoked", detail=f"{tool}{who} in {session_id}")


def audit_for_halt(order: HaltOrder, event: str) -> AuditEntry:
    """The ``halted`` or ``unhalted`` entry of ``order``: its scope, and for a halt its reason."""
    why = f": {order.reason}" if order.reason and event == "halted" else ""
    return AuditEntry(at=order.at, actor=order.by, event=event, detail=f"{order.scope}{why}"[:500])


def audit_for_delegation(d: Delegation, *, now: float) -> AuditEntry:
    """The ``delegated`` entry of ``d``, given by its delegator."""
    return AuditEntry(at=now, actor=d.delegator, event="delegated", detail=given_text(d))


def audit_for_delegation_end(d: Delegation, *, now: float) -> AuditEntry:
    """The ``delegation_ended`` entry of ``d`` (ended by someone, or by ``expiry``)."""
    return AuditEntry(at=now, actor=d.ended_by or "expiry", event="delegation_ended", detail=ended_text(d))


def grant_of(row: Any) -> TrustGrant:
    """The trust grant of its SQL row (session, requester, tool, granted by, until; a tuple, or asyncpg's
    ``Record``)."""
    s, r, t, b, u = row
    return TrustGrant(session_id=s, requester=r, tool=t, granted_by=b, until=u)


def claim_of(key: str, row: Sequence[Any]) -> Claim:
    """The claim under ``key`` from its SQL row (:data:`CLAIM_COLUMNS`)."""
    return Claim(
        key=key,
        action_hash=row[0],
        holder=row[1],
        attempt=row[2],
        state=row[3],
        lease_until=row[4],
        result=loads(row[5]) if row[5] else None,
    )


def claim_row(cl: Claim) -> tuple[Any, ...]:
    """The SQL row of ``cl``: its key, then :data:`CLAIM_COLUMNS`."""
    result = dumps(cl.result) if cl.result is not None else None
    return (cl.key, cl.action_hash, cl.holder, cl.attempt, str(cl.state), cl.lease_until, result)


AUDIT_COLUMNS = "at, actor, event, approval_id, version, action_hash, outcome, detail, view_digest, view"
"""An audit entry's recorded columns (before ``prev`` and ``link``), in the order :func:`audit_values` gives them."""


def audit_values(e: AuditEntry) -> tuple[Any, ...]:
    """An entry's recorded fields in the order of :data:`AUDIT_COLUMNS` (the view as JSON text)."""
    view = dumps(e.view) if e.view is not None else None
    return (e.at, e.actor, e.event, e.approval_id, e.version, e.action_hash, e.outcome, e.detail, e.view_digest, view)


def audit_entry(row: Mapping[str, Any]) -> AuditEntry:
    """An audit entry from its table row by column name (the view decoded from its JSON text)."""
    view = row.get("view")
    return AuditEntry.model_validate({**row, "view": loads(view) if isinstance(view, str) else view})
