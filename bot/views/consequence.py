"""A tool's consequence on a card: "What will happen", hitl's label in a context line of its own, then the tool
author's output as plain text in a rich text box (literal: nothing in it formats, mentions or links), drawn with the
fidelity rules of arguments, and what could fool the eye in it listed under the box. Pure: no I/O."""

from __future__ import annotations

from typing import Any

from hitl.bot.views.escape import label
from hitl.engine.domain.consequences import WHAT_WILL_HAPPEN, Consequence
from hitl.engine.domain.drift import ConsequenceDrift
from hitl.engine.domain.redaction import bounded

__all__ = ["CONSEQUENCE", "CONSEQUENCE_LABEL", "CONSEQUENCE_ROOM", "DRIFT", "consequence_blocks", "drift_blocks"]

CONSEQUENCE_LABEL = "hitl_consequence_label"
CONSEQUENCE = "hitl_consequence"
"""The block ids of the consequence's label and of its box."""
CONSEQUENCE_ROOM = 1500
"""Characters of a consequence one card shows (the decision page and ``hitl show`` show it whole)."""
DRIFT = "hitl_drift"
"""The block id of hitl's notice on an approval asked again because its consequence drifted (the blocks of what
was approved follow, their ids ending ``_seen``)."""
WAS_APPROVED = "What was approved"


def consequence_blocks(
    consequence: Consequence, *, title: str = WHAT_WILL_HAPPEN, ids: str = ""
) -> list[dict[str, Any]]:
    """The consequence's blocks: hitl's label (``title``), the tool's output in a box, and its marks (if any);
    ``ids`` ends their block ids (a card showing two)."""
    lines = consequence.lines()
    text = bounded("\n".join(line for line, _ in lines), CONSEQUENCE_ROOM)
    said = "computed by the tool's own code from these arguments" if consequence.shown else "not computed"
    blocks: list[dict[str, Any]] = [
        {
            "type": "context",
            "block_id": CONSEQUENCE_LABEL + ids,
            "elements": [{"type": "mrkdwn", "text": f":crystal_ball: *{title}* ({said}; shown as text)"}],
        },
        {
            "type": "rich_text",
            "block_id": CONSEQUENCE + ids,
            "elements": [
                {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": text or " "}], "border": 0}
            ],
        },
    ]
    marks = list(dict.fromkeys(w for _, warnings in lines for w in warnings))
    if marks:
        shown = "; ".join(label(m, 200) for m in marks[:4]) + (f"; and {len(marks) - 4} more" if len(marks) > 4 else "")
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f":warning: look closely: {shown}"}]})
    return blocks


def drift_blocks(drift: ConsequenceDrift) -> list[dict[str, Any]]:
    """An approval asked again because its consequence drifted: hitl's notice, then what was approved (the
    consequence its deciders saw), drawn as a consequence is; what will happen now follows on the card."""
    notice = {
        "type": "section",
        "block_id": DRIFT,
        "text": {"type": "mrkdwn", "text": f":warning: *{label(drift.notice, 400)}*"},
    }
    return [notice, *consequence_blocks(drift.seen, title=WAS_APPROVED, ids="_seen")]
