"""SlackNotifier: posts review cards once, keeps them current, and never loses an update.

It is thin: each kind of message out is its own worker over one shared :class:`~hitl.bot.outbound.floor.Floor`
(the counted call, claim-once, drawing a message), and the sweep is the only place that calls several.

* Nothing that records waits on Slack: a new approval's card (:mod:`~hitl.bot.outbound.posts`), an FYI
  (:mod:`~hitl.bot.outbound.fyis`) and a card update (:mod:`~hitl.bot.outbound.updates`) are handed to the bot's
  own workers and sent as Slack's limits allow (:mod:`hitl.bot.outbound.pacer`).
* The sweep posts what never made it, reminds (:mod:`~hitl.bot.outbound.reminders`), hands unanswered approvals on
  (:mod:`~hitl.bot.outbound.hand_ons`) and brings cards a halt covers up to date
  (:mod:`~hitl.bot.outbound.halt_notices`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.metrics import Metrics
from hitl.bot.outbound.alerts import post_alert
from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.fyis import Fyis
from hitl.bot.outbound.halt_notices import HaltNotices
from hitl.bot.outbound.hand_ons import HandOns
from hitl.bot.outbound.posts import CardPosts
from hitl.bot.outbound.reminders import Reminders
from hitl.bot.outbound.updates import CARD_JOB, CardUpdates
from hitl.bot.views.arguments import Declared
from hitl.bot.views.card_cache import CardCache
from hitl.engine.config.hitl_yaml import NotifySpec
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.presentation import Presentation
from hitl.engine.errors import EngineError
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Clock, Store
from hitl.engine.process.tasks import Outages

__all__ = ["SlackNotifier"]

log = logging.getLogger(__name__)


class SlackNotifier:
    """The :class:`hitl.engine.ports.Notifier` for Slack."""

    def __init__(
        self,
        client: AsyncWebClient,
        store: Store,
        clock: Clock,
        spec: NotifySpec,
        *,
        default_channel: str | None,
        replica: str,
        metrics: Metrics,
        backoff: Callable[[int], float] = lambda n: min(30.0, 0.5 * 2**n),
        lease: float = 15.0,
        poll: float = 5.0,
        declared: Declared | None = None,
        view_of: Callable[[Approval], Presentation] | None = None,
        members_of: Callable[[str], Sequence[str]] = lambda role: (),
        page_of: Callable[[str], str] | None = None,
        withdrawable: bool = False,
    ) -> None:
        cards = CardCache(declared=declared, view_of=view_of, page_of=page_of)
        self.floor = Floor(
            client, store, clock, spec, default_channel=default_channel, replica=replica, metrics=metrics, cards=cards
        )
        self.floor.withdrawable = withdrawable
        """What every worker shares: the client, the store, the notify settings, the cards, the stop switch."""
        self.updates = CardUpdates(self.floor, backoff=backoff, lease=lease, poll=poll)
        self.posts = CardPosts(self.floor, changed=self.updates.changed)
        self.fyis = Fyis(self.floor)
        self.reminders = Reminders(self.floor, members_of=members_of)
        self.halts = HaltNotices(self.floor, self.updates)
        self.hand_ons = HandOns(self.floor, changed=self.updates.changed, members_of=members_of)
        self._sweep_cursor: str | None = None

    # -- what the rest of the bot reads ------------------------------------------------------------------------
    @property
    def client(self) -> AsyncWebClient:
        """The (paced) Slack Web API client."""
        return self.floor.client

    @property
    def store(self) -> Store:
        """The store the cards show."""
        return self.floor.store

    @property
    def cards(self) -> CardCache:
        """The cards this process rendered, by approval version (every update of a version reuses its card)."""
        return self.floor.cards

    @property
    def switch(self) -> StopSwitch:
        """The stop switch as this process reads it."""
        return self.floor.switch

    @property
    def on_card(self) -> list[Callable[[Approval], Awaitable[None]]]:
        """Called with the approval each time its card is posted or brought up to date (the Home tabs follow)."""
        return self.floor.on_card

    @property
    def on_halts(self) -> list[Callable[[], Awaitable[None]]]:
        """Called when the stop switch's orders changed (the Home tabs show them)."""
        return self.halts.on_halts

    async def halt_of(self, approval: Approval) -> HaltOrder | None:
        """The stop switch's order covering a pending approval's tool (its card says so)."""
        return await self.floor.halt_of(approval)

    async def members(self, ids: Sequence[str], *, known: Approval | None = None) -> list[Approval]:
        """The approvals ``ids`` name as they now stand, in a group card's order."""
        return await self.floor.members(ids, known=known)

    # -- Notifier protocol ----------------------------------------------------------------------------------
    decision_jobs = (CARD_JOB,)

    def channel_for(self, a: Approval) -> str | None:
        """The channel ``a``'s card goes to (None: no approval channel is configured)."""
        return self.floor.channel_for(a)

    async def approval_requested(self, approval: Approval) -> None:
        self.posts.queue(approval)  # posted by this channel's worker, never on the proposer's time

    async def approval_changed(self, approval: Approval, *, queued: bool = False) -> None:
        await self.updates.changed(approval, queued=queued)

    def kick(self) -> None:
        """Make sure the update loop is running and looks at the queue now."""
        self.updates.kick()

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None:
        # Its durable job was queued with the call's audit entry: the FYI worker posts it as Slack allows.
        self.fyis.kick()

    async def post_alert(self, text: str, *, channel: str | None = None) -> None:
        """A fired or resolved alert, to ``channel`` (hitl.yaml's ``alerts.channel``) or the approval channel."""
        await post_alert(self.floor, text, channel=channel)

    async def watch_halts(self) -> None:
        """When the stop switch's orders change, bring the cards they cover up to date and tell the Home tabs."""
        await self.halts.watch()

    # -- the sweep ---------------------------------------------------------------------------------------------
    async def sweep(self, *, pages: int = 5, page_size: int = 200) -> None:
        """Post cards that never made it (approvals created by agent processes, posts that failed), and one
        reminder before expiry; make sure the card-update loop runs (it takes over the updates a replica that
        died left queued). Pages through every pending approval, ``pages`` pages per sweep, resuming where the
        last sweep stopped, so no approval waits behind old ones (a background sweeper)."""
        self.fyis.kick()
        self.updates.kick()  # card updates a replica that died left queued: this process's loop takes them over
        await self.halts.watch()
        store = self.floor.store
        now = self.floor.clock.now()
        for _ in range(pages):
            page = await store.approvals.list_pending(limit=page_size, cursor=self._sweep_cursor)
            self._sweep_cursor = page.cursor
            refs = await asyncio.gather(*(store.messages.get(a.id) for a in page.items))
            for a, ref in zip(page.items, refs, strict=True):
                if ref is None:  # queued together, so the like ones among them can share a group card
                    self.posts.queue(a)
            for a, ref in zip(page.items, refs, strict=True):
                if ref is not None and a.handed_on(now) and a.expires_at > now:
                    try:
                        await self.hand_ons.hand_on(a, ref)
                    except (SlackApiError, EngineError) as exc:  # tried again on a later sweep (its claim lapses)
                        log.warning("could not hand %s on yet: %s", a.id, exc)
                if ref is not None and self.reminders.due(a, now=now):
                    await self.reminders.remind(a)
            if page.cursor is None:
                return

    async def watch_created(self, *, wait: float = 5.0) -> None:
        """Card every approval another process creates as soon as the store announces it (Redis pub/sub; SQLite a
        check of the newest row every 50 ms), for as long as it runs. The sweep stays the safety net for a wake-up
        lost to a dropped connection, and for approvals created while no ``hitl serve`` ran."""
        store = self.floor.store
        watching = Outages("watching for new approvals", every=wait, logger=log)
        while True:
            try:
                for approval_id in await store.approvals.wait_created(timeout=wait):
                    a = await store.approvals.get(approval_id)
                    if a.status is Status.PENDING and await store.messages.get(a.id) is None:
                        self.posts.queue(a)
                watching.ok()
            except Exception as exc:  # the store is away: say so once, try again after a pause
                watching.failed(exc)
                await asyncio.sleep(wait)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    async def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued card, FYI and card update has landed (tests, shutdown)."""

        def busy() -> list[asyncio.Task[None]]:
            workers = [*self.posts.workers(), self.fyis.worker()]
            return [t for t in workers if t is not None and not t.done()]

        async def drained() -> None:
            while True:
                if working := busy():
                    await asyncio.gather(*working, return_exceptions=True)
                    continue
                await self.updates.idle()
                if not self.posts.workers() and not busy():
                    return

        await asyncio.wait_for(drained(), timeout)

    async def close(self) -> None:
        """Stop every worker (what they had not sent stays queued in the store for the next process)."""
        workers = [t for t in (self.fyis.worker(), *self.posts.workers()) if t is not None]
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        await self.updates.close()
