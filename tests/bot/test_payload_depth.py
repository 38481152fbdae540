"""The nesting limit on what a request carries: exactly :data:`MAX_DEPTH` levels pass, one more is refused, through
objects and arrays alike and however wide the levels are."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from hitl.bot.requests.payloads import MAX_DEPTH, PayloadError, parse_request


def nested(levels: int) -> Any:
    """``levels`` containers deep, alternating objects and arrays, with wide siblings at every level (the innermost
    array holds an object: that is its last level)."""
    value: Any = "leaf"
    for i in range(levels - 1):
        value = {"wide": list(range(20)), "next": value} if i % 2 else [{"x": 1}, value, "s", 2.5, None, True]
    return value


def click(payload: Any) -> bytes:
    doc = {"type": "block_actions", "actions": [{"action_id": "a", "value": "v"}], "deep": payload}
    return urlencode({"payload": json.dumps(doc)}).encode()


def depth_refused(body: bytes) -> bool:
    try:
        parse_request(body)
    except PayloadError as exc:  # the click is not a whole one: refused later for that, past the depth check
        return "deeper than" in str(exc)
    return False


def test_the_deepest_allowed_payload_passes_and_one_level_more_is_refused() -> None:
    assert not depth_refused(click(nested(MAX_DEPTH - 1)))  # the payload object itself is the first level
    assert depth_refused(click(nested(MAX_DEPTH)))
    assert depth_refused(click(nested(MAX_DEPTH * 4)))
