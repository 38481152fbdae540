"""What every button listener says when a click cannot stand, and how it tells the clicker alone."""

from __future__ import annotations

import logging

from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.errors import SlackApiError

from hitl.bot.context import BotContext
from hitl.bot.requests.payloads import Interaction

__all__ = ["BAD_VALUE", "form_not_opened", "refuse_button", "tell"]

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


async def form_not_opened(respond: AsyncRespond, exc: Exception, *, log: logging.Logger, opening: str) -> None:
    """Tell the clicker the form a button opens did not open, from the ``except`` that caught ``exc``: Slack's own
    error when it refused ``views.open`` (a click again may open it), otherwise that something went wrong. Logged on
    the listener's ``log``, the traceback with ``opening`` (what was being opened) for a failure of hitl's own."""
    if isinstance(exc, SlackApiError):
        log.warning("views.open failed: %s", exc.response.get("error"))
        await tell(respond, f":warning: Could not open the form (Slack said {exc.response.get('error')}). Click again.")
    else:
        log.exception("opening %s failed", opening)
        await tell(respond, ":warning: Something went wrong opening the form. Try again.")
