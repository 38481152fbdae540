"""Slack's wire text as a person reads it in Slack: what the scripted demo prints.

Slack sends ``&lt;!channel&gt;``, ``:no_entry:``, ``*bold*`` and ``<!date^…|fallback>``; a person sees ``<!channel>``
as plain text, an emoji, bold text and a date. The transcript shows the latter, so it reads like the desk it
describes. (What is escaped, and that nothing in it pings anyone, the demo checks on the wire form.)
"""

from __future__ import annotations

import re

__all__ = ["as_seen"]

_EMOJI = {
    "no_entry": "⛔",
    "no_entry_sign": "🚫",
    "checkered_flag": "🏁",
    "ballot_box_with_check": "☑️",
    "white_check_mark": "✅",
    "x": "❌",
    "warning": "⚠️",
    "lock": "🔒",
    "hourglass": "⌛",
    "arrows_counterclockwise": "🔄",
    "gear": "⚙️",
    "grey_question": "❔",
    "bell": "🔔",
    "hand": "✋",
    "octagonal_sign": "🛑",
    "rotating_light": "🚨",
    "information_source": "ℹ️",
    "mortar_board": "🎓",
}
_TOKEN = re.compile(
    r"<!date\^\d+\^[^|>]*\|([^>]*)>|<@([A-Z0-9_]+)>|:([a-z0-9_+-]+):|(?<![\w*])\*([^*\n]+)\*(?![\w*])|`([^`\n]*)`"
)


def as_seen(text: str) -> str:
    """``text`` (Slack mrkdwn as sent) as Slack shows it, in plain text."""

    def one(m: re.Match[str]) -> str:
        date, user, emoji, bold, code = m.groups()
        if date is not None:
            return date
        if user is not None:
            return f"@{user}"
        if emoji is not None:
            return _EMOJI.get(emoji, m.group(0))
        return bold if bold is not None else code or ""

    shown = _TOKEN.sub(one, text)
    return shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
