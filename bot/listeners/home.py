"""``app_home_opened``: a reviewer opened the app's Home tab, their inbox; it is published for them at once."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from hitl.bot.context import BotContext
from hitl.bot.requests.payloads import event

__all__ = ["register_home"]


def register_home(app: AsyncApp, ctx: BotContext) -> None:
    """Register the Home tab's listener."""

    async def on_home_opened(context: AsyncBoltContext) -> None:
        opened = event(context).event
        if opened is None or opened.tab != "home":
            return  # the Messages tab: nothing of ours to show there
        # Slack is answered when this returns; the tab is built and published after that.
        ctx.later(ctx.home.opened(opened.user))

    app.event("app_home_opened")(ctx.tracked(on_home_opened))
