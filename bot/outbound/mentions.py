"""Role members as Slack mentions: whom a hand-on or a reminder calls by name."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["mention", "mentions"]


def mention(member: str) -> str:
    """A role member as a Slack mention: ``<@U…>`` for a person, ``<!subteam^S…>`` for a user group ("" for an id
    Slack does not know, such as ``cli:alice``: hitl.yaml's ids never reach mrkdwn unchecked)."""
    if re.fullmatch(r"[UW][A-Z0-9_]{2,20}", member):
        return f"<@{member}>"
    if re.fullmatch(r"S[A-Z0-9_]{2,20}", member):
        return f"<!subteam^{member}>"
    return ""


def mentions(members: Iterable[str]) -> str:
    """Each member Slack knows mentioned once, in the order given, space-separated ("" for none)."""
    seen: dict[str, None] = {}
    for m in members:
        if said := mention(m):
            seen.setdefault(said, None)
    return " ".join(seen)
