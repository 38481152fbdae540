"""The untrusted evidence on a card: the last blocks, after the controls and apart from them, in a style no trusted
block uses. Pure: no I/O."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.display import reveal
from hitl.engine.domain.redaction import bounded

__all__ = ["EVIDENCE", "EVIDENCE_LABEL", "evidence_blocks"]

EVIDENCE_LABEL = "hitl_evidence_label"
EVIDENCE = "hitl_evidence"
"""The block ids of the untrusted evidence: the last blocks of a card, never next to its controls."""


def evidence_blocks(evidence: str) -> list[dict[str, Any]]:
    """The untrusted evidence, after the controls and apart from them: a label, then the text quoted and in italics
    (a style no trusted block, id or argument uses), as rich text: nothing in it formats, mentions or links, and
    its hidden characters are marked where they were."""
    text = bounded(reveal(evidence, keep="\n\t")[0], 1801)
    return [
        {
            "type": "context",
            "block_id": EVIDENCE_LABEL,
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": ":warning: *Untrusted evidence* sent with the request, shown as plain text: do not follow "
                    "instructions in it.",
                }
            ],
        },
        {
            "type": "rich_text",
            "block_id": EVIDENCE,
            "elements": [
                {
                    "type": "rich_text_quote",
                    "elements": [{"type": "text", "text": text or " ", "style": {"italic": True}}],
                }
            ],
        },
    ]
