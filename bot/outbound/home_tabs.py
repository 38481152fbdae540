"""Keeping each reviewer's Home tab current: published when they open it, and again when what it shows changes.

A change (a card posted or brought up to date, a trust revoked) marks the viewers it concerns: the reviewers who
may decide that approval or decided it, and for trust only those who may decide the tool. After a short debounce
each marked viewer's tab is published once, however many changes arrived meanwhile, and never more than once per
viewer per :data:`PER_VIEWER` seconds (an opening or a change inside that time is published when it ends, in the
state of that moment: the last state wins). Viewers are the people who opened the tab since this process started
(Slack sends ``app_home_opened`` each time, and the tab is published then, so a restart loses nothing a viewer can
see). Every ``views.publish`` goes through the bot's pacer (Tier 4 for the app). A failed publish is logged and
retried at the next change or opening: the tab is a view of the store, never the record; a line whose link or
lookup fails is shown without it, never at the cost of the tab.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.metrics import Metrics
from hitl.bot.views.home import SHOWN, Waiting, home_view
from hitl.engine.delegation.delegations import Delegations
from hitl.engine.domain.decide import eligible, may_vote
from hitl.engine.domain.delegation import Delegation
from hitl.engine.domain.models import Approval, Decision, DecisionKind, Reviewer
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Clock, ReviewerDirectory, Store
from hitl.engine.storage.queue import queue_page

__all__ = ["HomeTabs"]

log = logging.getLogger(__name__)
RECENT = 100
"""How many of the newest approvals are searched for the viewer's own decisions."""
PER_VIEWER = 5.0
"""Seconds between two publishes of one viewer's tab, at least."""


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
        pace: Clock | None = None,
        per_viewer: float = PER_VIEWER,
        tick: float = 0.25,
        delegations: Delegations | None = None,
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
        self.pace = pace or clock
        """The clock the per-viewer pace runs on (the bot's pacer's)."""
        self.per_viewer = per_viewer
        self.tick = tick
        self.delegations = delegations
        """The store's delegations: each person's tab shows the ones they gave and were handed."""
        self.published = 0
        """Tabs published (``views.publish`` calls made)."""
        self._last: dict[str, float] = {}
        self._viewers: set[str] = set()
        self._dirty: set[str] = set()
        self._links: dict[str, str] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    async def opened(self, user: str) -> None:
        """``user`` opened the Home tab: publish it now (or when its pace allows), and keep it current."""
        self._viewers.add(user)
        if self._due(user) and user not in self._dirty:
            await self._publish(user)
            return
        self._mark(user)

    async def changed(self, approval: Approval | None = None, *, tool: str | None = None) -> None:
        """Something the tabs show changed: ``approval``; or the trust in ``tool`` (seen by those who may decide
        it); or, with neither, the stop switch (seen by every viewer). Marks the viewers it concerns; their tabs
        are published after the debounce, at their pace."""
        trust = tool
        if approval is not None and any(d.kind is DecisionKind.TRUST for d in approval.decisions):
            trust = approval.tool  # a trust grant: also shown to everyone who may decide the tool
        for user in list(self._viewers):
            if await self._concerned(user, approval, trust):
                self._mark(user)

    async def delegation_changed(self, d: Delegation) -> None:
        """A delegation was given, ended or ran out: both its people's tabs show it (whether or not they opened
        theirs since this process started: the delegate may not know of it yet)."""
        for user in (d.delegator, d.delegate):
            self._viewers.add(user)
            self._mark(user)

    @property
    def marked(self) -> int:
        """Viewers whose tab waits to be published (its debounce, or its pace)."""
        return len(self._dirty)

    @property
    def quiet(self) -> bool:
        """Nothing waits to be published and no publish is under way."""
        return not self._dirty and self._idle.is_set()

    def _mark(self, user: str) -> None:
        self._dirty.add(user)
        if self._flusher is None or self._flusher.done():
            self._idle.clear()
            self._flusher = asyncio.create_task(self._flush(), name="hitl-home-tabs")

    def _due(self, user: str) -> bool:
        return self.pace.now() - self._last.get(user, float("-inf")) >= self.per_viewer

    async def _concerned(self, user: str, approval: Approval | None, trust: str | None) -> bool:
        if approval is None and trust is None:
            return True  # the stop switch's orders: on every tab
        if approval is not None and any(d.reviewer == user for d in approval.decisions):
            return True
        try:
            reviewer = await self.reviewers.reviewer(user)
        except Exception as exc:  # a lookup failed: publish (the tab is a view of the store; it shows what is)
            log.warning("could not tell whether a change concerns %s (%s); publishing their tab", user, exc)
            return True
        if approval is not None and eligible(approval, reviewer, self.clock.now()):
            return True
        return trust is not None and self.may_see_trust(reviewer.roles, trust)

    async def settled(self, timeout: float = 10.0) -> None:
        """Until every marked tab was published (tests, shutdown)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def close(self) -> None:
        """Stop publishing (what is marked is dropped: the next opening publishes afresh)."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        self._idle.set()

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(self.debounce)  # changes arriving meanwhile join this round
            while self._dirty:
                due = sorted(u for u in self._dirty if self._due(u))
                for user in due:
                    self._dirty.discard(user)
                    await self._publish(user)  # in the state of this moment: what changed since is in it
                if not due and self._dirty:  # each waits out its pace (real pauses: a fake clock moves unseen)
                    wait = min(self._last.get(u, 0.0) + self.per_viewer for u in self._dirty) - self.pace.now()
                    await asyncio.sleep(min(max(wait, 0.0), self.tick))
        finally:
            self._idle.set()

    async def _publish(self, user: str) -> None:
        self._last[user] = self.pace.now()
        self.published += 1
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
        waiting, more, count = await self._waiting(reviewer)
        decided = await self._decided(user)
        grants = [  # only the trust in tools this person may decide
            g for g in await self.store.trust.all_active(now=now) if self.may_see_trust(reviewer.roles, g.tool)
        ][: SHOWN + 1]
        halts = await StopSwitch.shared(self.store, self.clock).orders()
        given, received = await self.delegations.of(user) if self.delegations is not None else (None, [])
        return home_view(
            user,
            waiting=waiting,
            more_waiting=more,
            waiting_count=count,
            decided=decided,
            grants=grants,
            now=now,
            halts=halts,
            view_of=self.view_of,
            given=given,
            received=received,
        )

    async def _waiting(self, reviewer: Reviewer) -> tuple[list[Waiting], bool, int]:
        """The first of what ``reviewer`` may decide, most important first; whether there is more; how many."""
        if not reviewer.roles:
            return [], False, 0
        roles, now = sorted(reviewer.roles), self.clock.now()
        approvals = self.store.approvals
        page = await queue_page(approvals, now=now, roles=roles, exclude_requester=reviewer.id, limit=SHOWN)
        mine = [a for a in page.items if may_vote(a, reviewer, now)]
        count = await approvals.count_pending(roles=roles, exclude_requester=reviewer.id, now=now)
        return [Waiting(a, await self._link(a)) for a in mine], page.cursor is not None, count

    async def _decided(self, user: str) -> list[tuple[Approval, Decision]]:
        page = await self.store.approvals.list_recent(limit=RECENT)
        out = []
        for a in page.items:
            mine = [d for d in a.decisions if d.reviewer == user]
            if mine:
                out.append((a, mine[-1]))
        out.sort(key=lambda pair: pair[1].at, reverse=True)
        return out[:SHOWN]

    async def card_link(self, a: Approval) -> str | None:
        """The permalink of ``a``'s card, as its Home line links it (None while it has no card)."""
        return await self._link(a)

    async def _link(self, a: Approval) -> str | None:
        """The card's permalink (``chat.getPermalink``, remembered): None while it has no card."""
        if a.id in self._links:
            return self._links[a.id]
        try:
            ref = await self.store.messages.get(a.id)
            if ref is None:
                return None
            resp = await self.client.chat_getPermalink(channel=ref.channel, message_ts=ref.ts)
        except SlackApiError as exc:
            log.warning("no permalink for the card of %s: %s", a.id, exc.response.get("error"))
            return None
        except Exception as exc:  # an answer that is not JSON, a dropped connection: this line goes without
            log.warning("no permalink for the card of %s: %s", a.id, exc)
            return None
        link = str(resp.get("permalink") or "")
        if not link.startswith(("https://", "http://")) or any(c in link for c in "|<> "):
            return None  # never a link that could break out of its mrkdwn
        self._links[a.id] = link
        return link
