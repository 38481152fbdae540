"""Alerts: a fired or resolved alert, posted ahead of any backlog of cards."""

from __future__ import annotations

import logging

from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.pacer import urgent
from hitl.bot.views.escape import label

__all__ = ["post_alert"]

log = logging.getLogger(__name__)


async def post_alert(floor: Floor, text: str, *, channel: str | None = None) -> None:
    """Post ``text`` to ``channel`` (hitl.yaml's ``alerts.channel``) or the approval channel."""
    target = channel or floor.spec.channel or floor.default_channel
    if not target:
        log.warning("no channel for alerts (set alerts.channel in hitl.yaml): %s", text)
        return
    with urgent():  # an alert never waits behind a backlog of cards
        await floor.call(
            "chat.postMessage",
            floor.client.chat_postMessage,
            channel=target,
            text=text,
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": label(text, 2900), "verbatim": True}}],
        )
