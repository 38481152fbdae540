"""Identifiers: short, URL-safe, Crockford base32 (no I, L, O, U)."""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["approval_id", "new_session_id", "short_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _b32(data: bytes, n: int) -> str:
    num = int.from_bytes(data, "big")
    out = []
    for _ in range(n):
        num, r = divmod(num, 32)
        out.append(_ALPHABET[r])
    return "".join(out)


def approval_id(dedupe_key: str) -> str:
    """Deterministic id from the dedupe key: re-asking the same action finds the same approval."""
    return "apr_" + _b32(hashlib.sha256(dedupe_key.encode("utf-8")).digest(), 10)


def short_id(prefix: str) -> str:
    """A random id like ``ses_7KQ2M9XW3A``."""
    return f"{prefix}_" + _b32(secrets.token_bytes(8), 10)


def new_session_id() -> str:
    return short_id("ses")
