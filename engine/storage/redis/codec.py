"""How approvals are laid out in Redis, hash-tagged so a cluster keeps one approval's keys together.

* ``{prefix}:{<id>}:doc``: the static document (everything fixed at creation), written once and never
  re-encoded, so arguments keep their exact JSON. Default-valued fields are left out to save memory.
* ``{prefix}:{<id>}``: a small hash of the fields the Lua scripts check and change. Every value stays
  under 64 bytes while pending, so Redis keeps it in its compact listpack encoding.
* ``{prefix}:{<id>}:audit``: the approval's append-only audit list.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hitl.engine.domain.models import Approval, Tier, kind_of_older
from hitl.engine.domain.ranking import rank_key
from hitl.engine.domain.records import AuditEntry, unchained_fields

__all__ = [
    "DYNAMIC",
    "KIND_FIRST",
    "approval_from_result",
    "approval_to_fields",
    "entry_body",
    "split_link",
    "static_doc",
    "text",
    "with_kind_first",
]

# Fields the scripts maintain; everything else lives in the static document.
DYNAMIC = ("status", "version", "decisions", "reason", "approved_args", "superseded_by", "updated_at")


KIND_FIRST = '{"kind":'
"""How every static document this hitl writes begins: its kind first, so a read tells an older hitl's document (no
kind; its first field is the id) by its first bytes, without parsing it."""


def static_doc(a: Approval) -> str:
    """The approval's fields fixed at creation, as the JSON document stored once beside its hash, its kind first."""
    data = a.model_dump(mode="json", exclude={*DYNAMIC, "kind"}, exclude_defaults=True)
    data.setdefault("quorum", a.quorum)  # a required field with a default must survive exclude_defaults
    return with_kind_first(data, str(a.kind))


def with_kind_first(data: dict[str, Any], kind: str) -> str:
    """A static document's JSON with ``kind`` as its first field (see :data:`KIND_FIRST`)."""
    return json.dumps(
        {"kind": kind, **{k: v for k, v in data.items() if k != "kind"}}, separators=(",", ":"), ensure_ascii=False
    )


def _kind_added(doc: str) -> str:
    """An older hitl's document with the kind its old markers meant (read as `hitl migrate` would write it)."""
    data = json.loads(doc)
    return with_kind_first(data, str(kind_of_older(data)))


def approval_to_fields(a: Approval) -> dict[str, str]:
    """The approval's changing fields, as the hash the scripts read and update."""
    approvals = len([d for d in a.decisions if d.kind in ("approve", "trust")])
    fields = {
        "status": str(a.status),
        "version": str(a.version),
        "expires_at": repr(a.expires_at),
        "hash": a.action_hash,
        "requester": a.requester,
        "role": a.required_role or "",
        "quorum": str(a.quorum),
        "trustable": "1" if a.trustable else "0",
        "attention": "1" if a.asks_attention else "0",
        "voters": "\n".join(voter for d in a.decisions for voter in d.voters),
        "approvals": str(approvals),
        "decisions": json.dumps([d.model_dump(mode="json") for d in a.decisions], separators=(",", ":")),
        "updated_at": repr(a.updated_at),
    }
    if a.tier is Tier.SELF:  # the one person who decides it, read by decide.lua (an absent field: nobody's own)
        fields["self"] = a.on_behalf_of or "\n"
    elif a.on_behalf_of:  # the person the agent acts for: never its reviewer (separation of duties)
        fields["behalf"] = a.on_behalf_of
    if a.backup_role and a.hand_on_at is not None:  # approval_new indexes it under its backup role too, from these
        backup = {"backup": a.backup_role, "hand_on_at": repr(a.hand_on_at), "created_at": repr(a.created_at)}
        fields |= {**backup, "rank": str(rank_key(a))}
    return fields


def approval_from_result(res: list[Any]) -> Approval:
    """Build an approval from a script's fixed-order answer: tag, code, doc, then the DYNAMIC fields.

    The fields are spliced into the stored document as JSON text and the whole is validated once from JSON (by
    pydantic's own parser: 3x faster than decoding the three JSON parts and validating the dict, on every read of
    an approval). The dynamic fields come last, so they win over any the document holds too, as they did.
    """
    doc, status, version, decisions, reason, approved_args, superseded_by, updated_at = (text(x) for x in res[2:10])
    if not doc.startswith(KIND_FIRST):  # written before kinds were a field, and not migrated yet
        doc = _kind_added(doc)
    head = doc.rstrip()[:-1].rstrip()  # the document's object, open: '{"id": ..., "tool": ...'
    dynamic = (
        f'"status":{_string(status)},"version":{int(version)},"decisions":{decisions or "[]"},'
        f'"reason":{_string(reason) if reason else "null"},"approved_args":{approved_args or "null"},'
        f'"superseded_by":{_string(superseded_by) if superseded_by else "null"},'
        f'"updated_at":{float(updated_at or 0.0)!r}}}'
    )
    return Approval.model_validate_json(f"{head}{',' if head != '{' else ''}{dynamic}")


def _string(value: str) -> str:
    """A JSON string literal."""
    return json.dumps(value, ensure_ascii=False)


def text(v: Any) -> str:
    """A reply value as ``str`` (``None`` as empty)."""
    if v is None:
        return ""
    return v.decode() if isinstance(v, bytes) else str(v)


def entry_body(e: AuditEntry) -> str:
    """An audit entry's JSON as the scripts chain it (its position and links are added by the script)."""
    return e.model_dump_json(exclude=unchained_fields(e))


_LINKED = re.compile(r',"prev":"([0-9a-f]*)","link":"([0-9a-f]{40})"\}\Z')


def split_link(stored: str) -> tuple[str, str, str] | None:
    """``(body, prev, link)`` of a chained entry as stored, or None when it carries no link."""
    m = _LINKED.search(stored)
    return (stored[: m.start()] + "}", m.group(1), m.group(2)) if m else None
