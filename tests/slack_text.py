"""The texts of Slack blocks, each with the kind of object holding it: what Slack parses (``mrkdwn``) and what it
shows as it is (``plain_text``, rich text's ``text`` elements)."""

from __future__ import annotations

from typing import Any

__all__ = ["parsed_text", "typed_texts"]


def typed_texts(value: Any) -> list[tuple[str, str]]:
    """Every text in ``value`` (blocks, a view, a message) with the type of the object holding it."""
    if isinstance(value, dict):
        own = [(str(value.get("type")), value["text"])] if isinstance(value.get("text"), str) else []
        return own + [t for k, v in value.items() if k != "text" for t in typed_texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in typed_texts(v)]
    return []


def parsed_text(value: Any) -> str:
    """Every mrkdwn text in ``value``, joined: what Slack reads for mentions, links and formatting."""
    return "\n".join(text for kind, text in typed_texts(value) if kind == "mrkdwn")
