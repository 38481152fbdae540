"""What could fool the eye, said where the eye is: the line under a card's top that names each argument carrying
a mark (look-alike letters, hidden characters, text that reads as another type) before the arguments say it in
full. The marks are the one view model's (:attr:`~hitl.engine.domain.presentation.Presentation.look_closely`)."""

from __future__ import annotations

from typing import Any

from hitl.bot.views.escape import label
from hitl.engine.domain.models import Approval

__all__ = ["look_closely_line", "look_closely_text"]


def look_closely_text(text: str) -> str:
    """The view's look-closely line as mrkdwn: an icon no argument can draw, then the marks, escaped (an argument's
    name is the agent's)."""
    return f":warning: *Look closely:* {label(text.removeprefix('look closely: '), 400)}"


def look_closely_line(a: Approval, text: str) -> dict[str, Any]:
    """A context block under a card's top with :func:`look_closely_text`."""
    return {
        "type": "context",
        "block_id": f"hitl_look:{a.id}",
        "elements": [{"type": "mrkdwn", "text": look_closely_text(text)}],
    }
