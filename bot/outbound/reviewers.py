"""Who is deciding: Slack user -> Reviewer with roles, user groups expanded through Slack (cached)."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.engine.domain.models import Reviewer
from hitl.engine.domain.reviewers import Roles
from hitl.engine.ports import Clock

__all__ = ["SlackReviewers"]

log = logging.getLogger(__name__)


class SlackReviewers:
    """The reviewer directory of Slack (a :class:`~hitl.engine.ports.ReviewerDirectory`): roles from hitl.yaml, with
    ``S…`` user-group ids resolved with ``usergroups.users.list`` every ``ttl`` s.

    A group that cannot be resolved grants nobody anything (fail closed); a stale answer is kept when a
    refresh fails.
    """

    def __init__(self, roles: Roles, client: AsyncWebClient, clock: Clock, *, ttl: float = 300.0) -> None:
        self.roles = roles
        self.client = client
        self.clock = clock
        self.ttl = ttl
        self._groups: dict[str, frozenset[str]] = {}
        self._fetched = -1e18

    def replace(self, roles: Roles) -> None:
        """Serve ``roles`` from now on (hitl.yaml reloaded), its user groups read again at the next decision: a
        reload is also how an operator has a group's change apply before ``ttl`` runs out."""
        self.roles = roles
        self._fetched = -1e18

    async def reviewer(self, reviewer_id: str) -> Reviewer:
        """The Slack user ``reviewer_id`` with the roles hitl.yaml and its user groups give them now."""
        roles = self.roles
        if roles.groups():
            await self._refresh()
            roles = roles.expanded(self._groups)
        return roles.reviewer(reviewer_id)

    async def _refresh(self) -> None:
        if self.clock.now() - self._fetched < self.ttl:
            return
        fresh: dict[str, frozenset[str]] = {}
        for group in sorted(self.roles.groups()):
            try:
                resp = await self.client.usergroups_users_list(usergroup=group)
                fresh[group] = frozenset(resp.get("users") or [])
            except SlackApiError as exc:
                log.warning("cannot resolve user group %s: %s", group, exc.response.get("error"))
                if group in self._groups:
                    fresh[group] = self._groups[group]
        self._groups = fresh
        self._fetched = self.clock.now()
