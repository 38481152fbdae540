"""Untrusted text -> inert Slack mrkdwn.

Slack's mrkdwn has three control characters, ``&``, ``<`` and ``>``; escaping them means no mention,
broadcast, channel, date or link can form. Untrusted text is also shown inside a code block (so ``*bold*``,
``> quotes`` and ``:emoji:`` do not render and nothing can imitate an approval), with backticks replaced so
the block cannot be closed early, and with invisible or direction-changing characters made visible.
Truncation happens after escaping and never splits an entity or a grapheme.
"""

from __future__ import annotations

import re
import unicodedata

from hitl.engine.domain.redaction import bounded, reveal_hidden

__all__ = ["code_block", "escape_mrkdwn", "inert", "label"]

_ENTITY_TAIL = re.compile(r"&[a-z]{0,4}$")


def escape_mrkdwn(text: str) -> str:
    """Escape Slack's three control characters (and nothing else)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _visible(text: str) -> str:
    return reveal_hidden(text)


def _cut(escaped: str, limit: int) -> str:
    out = bounded(escaped, limit)
    if out != escaped:
        body = out[:-1]
        m = _ENTITY_TAIL.search(body)
        if m:  # never leave half of "&amp;" behind
            body = body[: m.start()]
        out = body + "…"
    return out


def inert(text: str, limit: int = 2900) -> str:
    """Escaped, invisible characters shown, backticks neutralised, at most ``limit`` characters."""
    text = unicodedata.normalize("NFC", _visible(text)).replace("`", "\u02cb")
    return _cut(escape_mrkdwn(text), limit)


def code_block(text: str, limit: int = 2900) -> str:
    """Untrusted text as a code block: shown literally, never formatted, linked or mentioned."""
    body = inert(text, max(limit - 8, 1)) or " "
    return f"```\n{body}\n```"


def label(text: str, limit: int = 200) -> str:
    """A short value from configuration or a record (tool name, reviewer id), escaped for mrkdwn."""
    return _cut(escape_mrkdwn(_visible(text).replace("\n", " ").replace("`", "\u02cb")), limit)
