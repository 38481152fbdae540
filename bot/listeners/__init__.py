"""Bolt listeners: button clicks, slash commands, modal submissions, the Home tab."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from hitl.bot.context import BotContext
from hitl.bot.listeners.actions import register_actions
from hitl.bot.listeners.commands import register_commands
from hitl.bot.listeners.groups import register_groups
from hitl.bot.listeners.home import register_home
from hitl.bot.listeners.views import register_views
from hitl.bot.listeners.withdrawals import register_withdrawals

__all__ = ["register"]


def register(app: AsyncApp, ctx: BotContext) -> None:
    """Register every listener (buttons, group cards, ``/hitl`` commands, modal forms, Withdraw, the Home tab)."""
    register_actions(app, ctx)
    register_groups(app, ctx)
    register_commands(app, ctx)
    register_views(app, ctx)
    register_withdrawals(app, ctx)
    register_home(app, ctx)
