"""What a card's buttons carry: the approval's id, version and full action hash (``id|version|hash``), so a click
binds to exactly the action shown, and a click on an old card is caught. The buttons that decide carry the digest
of the view the card drew too (``id|version|hash|view``): the decision's audit entry keeps the view its decider
saw, and a view that is no longer the approval's is refused as stale."""

from __future__ import annotations

import re

from hitl.engine.domain.models import Approval

__all__ = ["button_value", "parse_button_value", "parse_decision_value"]

# The exact grammar, ASCII only: no Unicode digits, no leading zeros, no trailing newline.
_VALUE = re.compile(r"(apr_[0-9A-Z]{10})\|([1-9][0-9]{0,8})\|([0-9a-f]{64})", re.ASCII)
_DECISION = re.compile(_VALUE.pattern + r"(?:\|([0-9a-f]{64}))?", re.ASCII)


def button_value(a: Approval, view: str | None = None) -> str:
    """What a card's buttons carry: the approval's id, version and full action hash (a click binds to exactly this),
    and for a button that decides, ``view``: the digest of the view the card drew."""
    # The full hash (not a prefix): the click is bound to exactly this action, and the decide needs no read first.
    value = f"{a.id}|{a.version}|{a.action_hash}"
    return f"{value}|{view}" if view else value


def parse_button_value(value: str) -> tuple[str, int, str] | None:
    """``(approval id, version, action hash)`` or None for anything malformed or tampered with."""
    m = _VALUE.fullmatch(value) if isinstance(value, str) else None
    return (m.group(1), int(m.group(2)), m.group(3)) if m else None


def parse_decision_value(value: str) -> tuple[str, int, str, str | None] | None:
    """``(approval id, version, action hash, view digest)`` of a deciding button, or None for anything malformed.
    The digest is None on a card drawn before buttons carried one: its decision records that no view was named."""
    m = _DECISION.fullmatch(value) if isinstance(value, str) else None
    return (m.group(1), int(m.group(2)), m.group(3), m.group(4)) if m else None
