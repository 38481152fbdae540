"""Who is who in the Slack workspace (``users.info``): a person's profile (their time zone), and whether they are an
active human member, which a delegate not listed in ``hitl.yaml`` must be (the engine's
:class:`~hitl.engine.ports.Workspace`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

__all__ = ["SlackWorkspace"]

log = logging.getLogger(__name__)

_SLACKBOT = "USLACKBOT"
"""Slack's own helper: ``users.info`` reports it neither deleted nor a bot, yet it is nobody to hand a role to."""


@dataclass(frozen=True)
class SlackWorkspace:
    """The workspace as ``client``'s ``users.info`` reports it."""

    client: AsyncWebClient

    async def profile(self, user_id: str) -> dict[str, Any] | None:
        """``users.info``'s user ``user_id``; None when Slack does not know them or cannot say now."""
        try:
            resp = await self.client.users_info(user=user_id)
        except SlackApiError as exc:
            log.info("users.info for %r: %s", user_id, exc.response.get("error"))
            return None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:  # unreachable: nobody is confirmed
            log.warning("users.info for %r failed: %s", user_id, exc)
            return None
        found = resp.get("user")
        return found if isinstance(found, dict) else None

    async def active_person(self, user_id: str) -> bool:
        """Whether ``user_id`` is an active human member: known, not deleted, not a bot, an app or Slackbot."""
        found = await self.profile(user_id)
        if found is None or user_id == _SLACKBOT:
            return False
        return not (found.get("deleted") or found.get("is_bot") or found.get("is_app_user"))
