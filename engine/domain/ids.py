"""Identifiers: short, URL-safe, Crockford base32 (no I, L, O, U)."""

from __future__ import annotations

import hashlib
import json
import secrets

from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["approval_id", "check_same_action", "dedupe_key", "new_session_id", "short_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _b32(data: bytes, n: int) -> str:
    num = int.from_bytes(data, "big")
    out = []
    for _ in range(n):
        num, r = divmod(num, 32)
        out.append(_ALPHABET[r])
    return "".join(out)


def dedupe_key(requester: str, key: str) -> str:
    """The dedupe key of ``requester``'s action under ``key`` (a session and the action hash, or the caller's own
    key): asking again with both the same returns the same approval, and no identity ever attaches to another's."""
    return json.dumps([requester, key], ensure_ascii=False, separators=(",", ":"))


def approval_id(dedupe_key: str) -> str:
    """Deterministic id from the dedupe key: re-asking the same action finds the same approval."""
    return "apr_" + _b32(hashlib.sha256(dedupe_key.encode("utf-8")).digest(), 10)


def short_id(prefix: str) -> str:
    """A random id like ``ses_7KQ2M9XW3A``."""
    return f"{prefix}_" + _b32(secrets.token_bytes(8), 10)


def new_session_id() -> str:
    """A new session id (``ses_`` and a short random id)."""
    return short_id("ses")


def check_same_action(stored: Approval, proposed: Approval) -> None:
    """Refuse to hand back ``stored`` for ``proposed`` unless both came from the same dedupe key.

    Ids are 50 bits of a hash of the dedupe key: two different actions can, very rarely, share one. Returning
    the stored approval then would let one action run on another's approval, so a collision is an error.
    """
    if stored.dedupe_key != proposed.dedupe_key:
        raise id_collision(stored.id, stored.tool)


def id_collision(approval_id: str, tool: str) -> EngineError:
    """The error for an approval id already taken by another action (see :func:`check_same_action`)."""
    return EngineError(
        f"approval id {approval_id} is already taken by another action ({tool}); propose this action "
        "with a different dedupe key (for example a new session id)",
        code=ErrorCode.ID_COLLISION,
        approval_id=approval_id,
    )
