"""What every button listener says when a click cannot stand, and how it tells the clicker alone."""

from __future__ import annotations

import logging

from slack_bolt.context.respond.async_respond import AsyncRespond

from hitl.bot.context import BotContext
from hitl.bot.requests.payloads import Interaction

__all__ = ["BAD_VALUE", "refuse_button", "tell"]

log = logging.getLogger(__name__)

BAD_VALUE = ":warning: This button is not valid (it may have been altered). Nothing changed."
"""What the clicker of an altered button (or one from a foreign message) is told."""


async def refuse_button(ctx: BotContext, req: Interaction, what: str) -> None:
    """A signed click whose button value is not ours (altered, or from a foreign message): audited, changes nothing."""
    value = (req.actions[0].value or "") if req.actions else ""
    await ctx.lifecycle.refused(value.split("|", 1)[0][:20], req.user.id, "tampered_button", f"{what}: {value[:80]!r}")


async def tell(respond: AsyncRespond, text: str, *, replace_original: bool = False) -> None:
    """Say ``text`` to the clicker alone; a reply that cannot be sent is logged, never raised."""
    try:
        await respond(text=text, response_type="ephemeral", replace_original=replace_original)
    except Exception:
        log.exception("could not tell the user")
