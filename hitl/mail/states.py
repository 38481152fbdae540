"""Delivery states as people read them: how an approval reached its reviewers on each channel (its Slack card
queued, posted or refused, its e-mail queued, sent or refused, its decision page opened), from the audit trail, one line
each, for ``hitl show`` and the decision page."""

from __future__ import annotations

__all__ = ["DELIVERY_EVENTS", "delivery_line"]

DELIVERY_EVENTS = {
    "card_queued": "Slack card queued",
    "card_posted": "Slack card posted",
    "card_refused": "Slack card refused",
    "mail_queued": "e-mail queued",
    "mail_sent": "e-mail sent",
    "mail_refused": "e-mail refused",
    "opened": "page opened",
}
"""The audit events that say how an approval reached people, in a reader's words."""


def delivery_line(event: str, *, actor: str, detail: str, outcome: str) -> str:
    """One delivery step in words (``e-mail sent to U_FIN1: 250 ...``, ``page opened by U_FIN1``)."""
    said = f"{DELIVERY_EVENTS[event]} {detail or 'by ' + actor}".strip()
    return said + (f" [{outcome}]" if outcome != "ok" else "")
