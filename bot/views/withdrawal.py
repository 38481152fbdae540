"""A decided card's withdrawal part: the Withdraw control while the approval's receipts are unspent, the form that
asks why, and, once withdrawn, who withdrew it and why (the reason in a box of its own, as a decision's reason is:
typed text, never markup, apart from the control). A withdrawal binds only relying parties that redeem or introspect
a receipt; the form says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hitl.bot.requests.button_values import button_value
from hitl.bot.views.escape import label
from hitl.bot.views.reasons import value_box
from hitl.engine.domain.models import Approval
from hitl.engine.receipts.withdrawing import REASON_MAX

__all__ = [
    "ACTION_WITHDRAW",
    "CALLBACK_WITHDRAW",
    "FORM_WITHDRAW",
    "ReceiptsShown",
    "withdraw_view",
    "withdrawal_blocks",
]

ACTION_WITHDRAW = "hitl_withdraw"
"""The decided card's Withdraw button: it opens :func:`withdraw_view` for a decider of the approval."""
FORM_WITHDRAW = "withdraw"
"""The withdrawal form's kind, signed into its metadata (a form of another kind cannot be submitted as it)."""
CALLBACK_WITHDRAW = "hitl_withdraw_submit"


@dataclass(frozen=True)
class ReceiptsShown:
    """What a decided card says of its approval's receipts (read from its audit trail, where both a withdrawal and
    a redeem are recorded): withdrawn (by whom, why), spent, or neither (the Withdraw control)."""

    withdrawn_by: str | None = None
    reason: str = ""
    spent: bool = False


def withdrawal_blocks(a: Approval, shown: ReceiptsShown, *, by: Callable[[str], str]) -> list[dict[str, Any]]:
    """The card's withdrawal part for ``shown``: who withdrew it and their reason in a box; that its receipt was
    spent (nothing to withdraw); else the Withdraw control. ``by``: a person as the card names them."""
    if shown.withdrawn_by is not None:
        line = (
            f":leftwards_arrow_with_hook: *Withdrawn* by {by(shown.withdrawn_by)}: its receipts are refused from now on"
        )
        return [
            {"type": "section", "block_id": f"hitl_withdrawn:{a.id}", "text": {"type": "mrkdwn", "text": line}},
            value_box(f"hitl_withdrawn_reason:{a.id}", shown.reason, REASON_MAX),
        ]
    if shown.spent:
        text = "Its receipt was spent: the protected system may have acted on it, so it can no longer be withdrawn."
        return [{"type": "context", "block_id": f"hitl_spent:{a.id}", "elements": [{"type": "mrkdwn", "text": text}]}]
    withdraw = {
        "type": "button",
        "action_id": ACTION_WITHDRAW,
        "text": {"type": "plain_text", "text": "Withdraw"},
        "value": button_value(a),
    }
    return [{"type": "actions", "block_id": f"hitl_withdraw:{a.id}", "elements": [withdraw]}]


def withdraw_view(a: Approval, metadata: str) -> dict[str, Any]:
    """The form Withdraw opens: what a withdrawal does (and whom it binds), and the reason it asks for."""
    what = (
        f"`{a.id}` · `{label(a.tool, 60)}`\nIts receipts are refused from now on by a protected system that redeems "
        "or introspects them (one that only checks a receipt's signature cannot know). Too late once one is spent."
    )
    return {
        "type": "modal",
        "callback_id": CALLBACK_WITHDRAW,
        "private_metadata": metadata,
        "title": {"type": "plain_text", "text": "Withdraw approval"},
        "submit": {"type": "plain_text", "text": "Withdraw"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": what}},
            {
                "type": "input",
                "block_id": "hitl_reason",
                "label": {"type": "plain_text", "text": "Why must it not be acted on?"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "max_length": REASON_MAX,
                },
            },
        ],
    }
