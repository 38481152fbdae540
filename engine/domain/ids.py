"""Identifiers: short, URL-safe, Crockford base32 (no I, L, O, U); and identifiers drawn in the form of another
(a practice twin's session and call id, in the form of its real approval's)."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import string

from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["alike", "approval_id", "check_same_action", "dedupe_key", "keyed_session_id", "new_session_id", "short_id"]

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _b32(data: bytes, n: int) -> str:
    num = int.from_bytes(data, "big")
    out = []
    for _ in range(n):
        num, r = divmod(num, 32)
        out.append(_ALPHABET[r])
    return "".join(out)


def dedupe_key(requester: str, key: str, person: str | None = None) -> str:
    """The dedupe key of ``requester``'s action under ``key`` (a session and the action hash, or the caller's own
    key): asking again with both the same returns the same approval, and no identity ever attaches to another's.
    ``person``, the one the agent acts for, is part of it when known: one agent identity acting for two people
    (two tokens, each with its ``acts_for``) never attaches one person's call to the other's approval, which that
    other confirmed or must not decide."""
    parts = [requester, key] if person is None else [requester, key, person]
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))


def approval_id(dedupe_key: str) -> str:
    """Deterministic id from the dedupe key: re-asking the same action finds the same approval."""
    return "apr_" + _b32(hashlib.sha256(dedupe_key.encode("utf-8")).digest(), 10)


def short_id(prefix: str) -> str:
    """A random id like ``ses_7KQ2M9XW3A``."""
    return f"{prefix}_" + _b32(secrets.token_bytes(8), 10)


def new_session_id() -> str:
    """A new session id (``ses_`` and a short random id)."""
    return short_id("ses")


def keyed_session_id(key: str) -> str:
    """A session id drawn from ``key`` (a request's own id): the same request, delivered again, names the same run."""
    return "ses_" + _b32(hashlib.sha256(key.encode("utf-8")).digest(), 10)


_RUNS = re.compile(r"([0-9A-Za-z]+)")
_WORD_NUMBER = re.compile(r"([A-Za-z]*)([0-9]+)")
_LOWER = ("abcdef", "abcdefghjkmnpqrstvwxyz", string.ascii_lowercase)
"""The alphabets a drawn letter comes from, the smallest first: hex, Crockford base32 (hitl's own ids), any."""


def alike(value: str) -> str:
    """A random identifier in the form of ``value``, never ``value`` itself: as long, its separators (anything but
    an ASCII letter or digit) in place, its words (a run of letters alone) kept and a word's number drawn anew
    (``chat-42`` -> ``chat-17``, ``call-0`` -> ``call-3``), every other letter and digit drawn in its class and
    from the smallest alphabet its part uses (hex stays hex: ``ses_7KQ2M9XW3A`` -> ``ses_P4FYZ6F40Y``, a UUID a
    UUID). A value of words alone has its last word drawn anew (``s-real`` -> ``s-kqzw``); one with no ASCII
    letter or digit, a random URL-safe string (at least 8 characters).

    Drawn, never computed from ``value``: knowing the real one names no twin. A form holds only so many values,
    so one may be another real one of the same caller's; nothing keys on a practice approval's session or call
    id (it belongs to no run and grants nothing).
    """
    parts = _RUNS.split(value)  # the runs of ASCII letters and digits at the odd places
    runs = list(range(1, len(parts), 2))
    if not runs:
        n = max(len(value), 8)
        return secrets.token_urlsafe(n)[:n]
    while True:
        drawn = [_redrawn(part) if i % 2 else part for i, part in enumerate(parts)]
        if all(parts[i].isalpha() for i in runs):  # nothing drawn yet: the last word is
            drawn[runs[-1]] = _drawn(parts[runs[-1]])
        out = "".join(drawn)
        if out != value:
            return out


def _redrawn(run: str) -> str:
    """A run of ASCII letters and digits anew: a word kept, a word's number drawn, any other mix drawn whole."""
    if run.isalpha():
        return run
    numbered = _WORD_NUMBER.fullmatch(run)
    if numbered is not None:
        return numbered[1] + _drawn(numbered[2])
    return _drawn(run)


def _drawn(run: str) -> str:
    """``run`` with each character drawn anew in its class (digit, lower-case or upper-case letter), letters from
    the smallest alphabet that holds those of their case in ``run``."""
    lower = next(a for a in _LOWER if {c for c in run if c.islower()} <= set(a))
    upper = next(a for a in _LOWER if {c.lower() for c in run if c.isupper()} <= set(a)).upper()
    pick = secrets.choice
    return "".join(pick(string.digits) if c.isdigit() else pick(lower) if c.islower() else pick(upper) for c in run)


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
