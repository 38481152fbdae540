"""Keeping each reviewer's Home tab current: published when they open it, and again when what it shows changes.

A change (a card posted or brought up to date, a trust revoked) marks the viewers it concerns; after a short
debounce each marked viewer's tab is published once, however many changes arrived meanwhile. Viewers are the
people who opened the tab since this process started (Slack sends ``app_home_opened`` each time, and the tab is
published then, so a restart loses nothing a viewer can see). A failed publish is logged and retried at the next
change or opening: the tab is a view of the store, never the record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.home import SHOWN, Waiting, home_view
from hitl.bot.metrics import Metrics
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.models import Approval, Decision, DecisionKind, Reviewer
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.ports import Clock, ReviewerDirectory, Store
from hitl.engine.stop_switch import StopSwitch

__all__ = ["HomeTabs"]

log = logging.getLogger(__name__)
RECENT = 100
"""How many of the newest approvals are searched for the viewer's own decisions."""


class HomeTabs:
    """Publishes the Home tab (``views.publish``) per viewer, at most once per viewer per burst of changes."""

    def __init__(
        self,
        client: AsyncWebClient,
        store: Store,
        clock: Clock,
        reviewers: ReviewerDirectory,
        metrics: Metrics,
        *,
        may_see_trust: Callable[[frozenset[str], str], bool],
        view_of: Callable[[Approval], Presentation] = present,
        debounce: float = 0.3,
    ) -> None:
        self.client = client
        self.view_of = view_of
        """Each approval's one view, with the served hitl.yaml's sentences and schemas (the cards' own)."""
        self.may_see_trust = may_see_trust
        """Whether a viewer with these roles may see the trust granted for this tool (they may decide it)."""
        self.store = store
        self.clock = clock
        self.reviewers = reviewers
        self.metrics = metrics
        self.debounce = debounce
        self._viewers: set[str] = set()
        self._dirty: set[str] = set()
        self._links: dict[str, str] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    async def opened(self, user: str) -> None:
        """``user`` opened the Home tab: publish it now, and keep it current from here on."""
        self._viewers.add(user)
        self._dirty.discard(user)
        await self._publish(user)

    async def changed(self, approval: Approval | None = None) -> None:
        """Something the tabs show changed: ``approval`` (None: trust grants, which every viewer sees). Marks the
        viewers it concerns; their tabs are published after the debounce."""
        if approval is not None and any(d.kind is DecisionKind.TRUST for d in approval.decisions):
            approval = None  # a trust grant is shown to everyone
        for user in list(self._viewers):
            if approval is None or await self._concerns(user, approval):
                self._dirty.add(user)
        if self._dirty and (self._flusher is None or self._flusher.done()):
            self._idle.clear()
            self._flusher = asyncio.create_task(self._flush(), name="hitl-home-tabs")

    async def settled(self, timeout: float = 10.0) -> None:
        """Until every marked tab was published (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def close(self) -> None:
        """Stop publishing (what is marked is dropped: the next opening publishes afresh)."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        self._idle.set()

    async def _concerns(self, user: str, a: Approval) -> bool:
        if any(d.reviewer == user for d in a.decisions):
            return True
        return eligible(a, await self.reviewers.reviewer(user))

    async def _flush(self) -> None:
        try:
            while self._dirty:
                await asyncio.sleep(self.debounce)  # changes arriving meanwhile join this round
                batch, self._dirty = self._dirty, set()
                for user in sorted(batch):
                    await self._publish(user)
        finally:
            self._idle.set()

    async def _publish(self, user: str) -> None:
        try:
            view = await self._view(user)
            await self.client.views_publish(user_id=user, view=view)
            self.metrics.slack_calls.labels(method="views.publish", outcome="ok").inc()
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            self.metrics.slack_calls.labels(method="views.publish", outcome=error).inc()
            log.warning("could not publish the Home tab of %s: %s", user, error)
        except Exception as exc:  # the store away: the next change or opening publishes it
            log.warning("could not build the Home tab of %s: %s", user, exc)

    async def _view(self, user: str) -> dict[str, Any]:
        now = self.clock.now()
        reviewer = await self.reviewers.reviewer(user)
        waiting, more = await self._waiting(reviewer)
        decided = await self._decided(user)
        grants = [  # only the trust in tools this person may decide
            g for g in await self.store.trust.all_active(now=now) if self.may_see_trust(reviewer.roles, g.tool)
        ][: SHOWN + 1]
        halts = await StopSwitch.shared(self.store, self.clock).orders()
        return home_view(
            user,
            waiting=waiting,
            more_waiting=more,
            decided=decided,
            grants=grants,
            now=now,
            halts=halts,
            view_of=self.view_of,
        )

    async def _waiting(self, reviewer: Reviewer) -> tuple[list[Waiting], bool]:
        if not reviewer.roles:
            return [], False
        page = await self.store.approvals.list_pending(
            roles=sorted(reviewer.roles), exclude_requester=reviewer.id, limit=SHOWN
        )
        mine = [a for a in page.items if eligible(a, reviewer) and reviewer.id not in a.approvers]
        return [Waiting(a, await self._link(a)) for a in mine], page.cursor is not None

    async def _decided(self, user: str) -> list[tuple[Approval, Decision]]:
        page = await self.store.approvals.list_recent(limit=RECENT)
        out = []
        for a in page.items:
            mine = [d for d in a.decisions if d.reviewer == user]
            if mine:
                out.append((a, mine[-1]))
        out.sort(key=lambda pair: pair[1].at, reverse=True)
        return out[:SHOWN]

    async def _link(self, a: Approval) -> str | None:
        """The card's permalink (``chat.getPermalink``, remembered): None while it has no card."""
        if a.id in self._links:
            return self._links[a.id]
        ref = await self.store.messages.get(a.id)
        if ref is None:
            return None
        try:
            resp = await self.client.chat_getPermalink(channel=ref.channel, message_ts=ref.ts)
        except SlackApiError as exc:
            log.warning("no permalink for the card of %s: %s", a.id, exc.response.get("error"))
            return None
        link = str(resp.get("permalink") or "")
        if not link.startswith(("https://", "http://")) or any(c in link for c in "|<> "):
            return None  # never a link that could break out of its mrkdwn
        self._links[a.id] = link
        return link
