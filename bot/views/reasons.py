"""The reasons on a decided card: each as its decider typed it, read from their decision, in a box of its own
(literal, hidden characters marked, cut at a grapheme boundary) with a button that opens the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hitl.bot.views.arguments import full_value_button, reason_index
from hitl.engine.domain.display import reveal
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.redaction import bounded

__all__ = ["REASON_CHARS", "reason_blocks", "reasons_room", "value_box"]


REASON_CHARS = 600
"""Characters of reasons a card shows in all, shared by its reasons (a card near Slack's limit of text still fits
them); "Show reason in full" opens the rest of each."""
_LEAST = 100


def reason_blocks(a: Approval, *, by: Callable[[str], str]) -> list[dict[str, Any]]:
    """Each reason a decider typed, read from their decision (not the approval's reason field, which a rejection
    alone fills): whose it is, then the words as written in a box, cut with a button to read them in full. The
    approval's own note (a cancellation's, a failure's) follows when no decision carries it. ``by``: a person as
    the card names them."""
    out: list[dict[str, Any]] = []
    told = {d.reason for d in a.decisions if d.reason}
    given = sum(1 for d in a.decisions[-5:] if d.reason)
    share = max(_LEAST, REASON_CHARS // max(given, 1))
    for i, d in list(enumerate(a.decisions))[-5:]:
        if not d.reason:
            continue
        block_id = f"hitl_reason:{a.id}" if not out else f"hitl_reason:{a.id}:{i}"
        out += [_context(f"Reason given by {by(d.reviewer)}"), value_box(block_id, d.reason, share)]
        if len(d.reason) > share:
            text = f"Show reason in full ({len(d.reason):,} characters)"
            button = full_value_button(a, reason_index(i), text)
            out.append({"type": "actions", "block_id": f"hitl_full_reason:{a.id}:{i}", "elements": [button]})
    if a.reason and a.reason not in told and a.status is not Status.EXPIRED:  # the outcome line says expiry
        out += [_context("Note"), value_box(f"hitl_note:{a.id}", a.reason, REASON_CHARS)]
    return out


def reasons_room(a: Approval) -> int:
    """About how many characters of text :func:`reason_blocks` adds to ``a``'s card (its boxes, whose reason each
    is, their buttons): what the card's arguments give up so the message stays within Slack's limit."""
    given = [d.reason for d in a.decisions[-5:] if d.reason]
    share = max(_LEAST, REASON_CHARS // max(len(given), 1))
    noted = a.reason and a.reason not in given and a.status is not Status.EXPIRED
    return sum(min(len(r), share) + 120 for r in given) + (REASON_CHARS if noted else 0)


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def value_box(block_id: str, text: str, limit: int) -> dict[str, Any]:
    """Free text (a reason, a schema) in a rich text box: literal, its hidden characters marked, cut at a grapheme
    boundary with ``…``."""
    box = bounded(reveal(text, keep="\n\t")[0], limit + 1)
    return {
        "type": "rich_text",
        "block_id": block_id,
        "elements": [
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": box or " "}], "border": 0}
        ],
    }
