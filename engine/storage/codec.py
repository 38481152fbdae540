"""Shared encoding helpers for the stores."""

from __future__ import annotations

import json
from typing import Any

from engine.domain.models import Approval
from engine.domain.records import AuditEntry
from engine.errors import InvalidInput

__all__ = ["audit_for_decision", "decode_cursor", "dumps", "encode_cursor", "loads"]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    return json.loads(text)


def encode_cursor(created_at: float, approval_id: str) -> str:
    return f"{created_at!r}|{approval_id}"


def decode_cursor(cursor: str | None) -> tuple[float, str] | None:
    if not cursor:
        return None
    at, _, aid = cursor.partition("|")
    try:
        return float(at), aid
    except ValueError:
        raise InvalidInput(f"malformed page cursor {cursor!r}; pass the cursor a previous page returned") from None


def audit_for_decision(
    approval: Approval, *, actor: str, event: str, now: float, outcome: str = "ok", detail: str = ""
) -> AuditEntry:
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
