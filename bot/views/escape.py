"""Short text from configuration or a record (a tool name, a reviewer id, a policy's reason) -> Slack mrkdwn.

Slack's mrkdwn has three control characters, ``&``, ``<`` and ``>``; escaping them means no mention, broadcast,
channel, date or link can form. Invisible or direction-changing characters are made visible, a line break becomes
a space and a backtick a look-alike (a label sits in one line, often inside an inline code span). Truncation
happens after escaping and never splits an entity or a grapheme. Arguments, evidence and reasons are never
labels: they go in rich text boxes (:mod:`hitl.bot.views.arguments`), which Slack shows as they are.
"""

from __future__ import annotations

import re

from hitl.engine.domain.redaction import bounded, reveal_hidden

__all__ = ["escape_mrkdwn", "label"]

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


_SLACK = 64
"""Characters past a label's limit still read before it is cut: more than the longest grapheme that straddles the cut
(graphemes_cut reads 16) and the look-ahead of a joiner's mark."""


def label(text: str, limit: int = 200) -> str:
    """A short value from configuration or a record (tool name, reviewer id), escaped for mrkdwn."""
    if len(text) > limit + _SLACK:  # only its start can show: marking and escaping never shorten text, so the rest is
        text = text[: limit + _SLACK]  # cut unread (a 1 MB value is not scanned for each line that names it)
    return _cut(escape_mrkdwn(_visible(text).replace("\n", " ").replace("`", "\u02cb")), limit)
