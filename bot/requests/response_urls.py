"""Only Slack's hosts receive ``respond()`` calls: a signed payload cannot point the bot's replies anywhere else."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from slack_bolt.context.async_context import AsyncBoltContext

__all__ = ["SLACK_RESPONSE_HOSTS", "ResponseUrls", "response_url_guard"]

log = logging.getLogger(__name__)

SLACK_RESPONSE_HOSTS = frozenset({"hooks.slack.com"})
"""Where Slack's response URLs live (https only)."""


async def _dropped(*_: Any, **__: Any) -> None:
    """Stands in for ``respond`` when the payload's ``response_url`` is not Slack's: the reply is not sent."""


class ResponseUrls:
    """Which response URLs the bot follows: Slack's hosts over https, and ``extra_netlocs`` (``host:port``:
    a local Slack stand-in, whose Web API also serves its response URLs)."""

    def __init__(self, extra_netlocs: Iterable[str] = ()) -> None:
        self.extra = frozenset(extra_netlocs)

    def allowed(self, url: object) -> bool:
        if not isinstance(url, str) or not url:
            return False
        parts = urlsplit(url)
        return (parts.scheme == "https" and parts.hostname in SLACK_RESPONSE_HOSTS) or parts.netloc in self.extra


def response_url_guard(
    urls: ResponseUrls,
) -> Callable[[AsyncBoltContext, Callable[[], Awaitable[None]]], Awaitable[None]]:
    """A Bolt global middleware that drops a ``response_url`` :class:`ResponseUrls` does not allow."""
    allowed = urls.allowed

    async def guard(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:  # noqa: A002 (Bolt's name)
        url = context.response_url
        if not url or not allowed(url):
            if url:
                log.warning("dropped a response_url to %s: not a Slack host", urlsplit(url).netloc[:100])
            # Without a usable response_url there is nobody to answer privately: replies go nowhere, quietly.
            context["response_url"] = None
            context["respond"] = _dropped
        await next()

    return guard
