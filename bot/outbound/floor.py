"""The floor every outbound worker stands on: the counted Web API call (paced by the client's pacer), the claim
that makes a one-off post happen once across replicas and restarts, and drawing one message (a card, or a group
card) as the store has it now.

The workers (:mod:`~hitl.bot.outbound.posts`, :mod:`~hitl.bot.outbound.updates`,
:mod:`~hitl.bot.outbound.reminders`, :mod:`~hitl.bot.outbound.fyis`, :mod:`~hitl.bot.outbound.alerts`,
:mod:`~hitl.bot.outbound.halt_notices`, :mod:`~hitl.bot.outbound.hand_ons`) share one floor, so they count their
calls, read the stop switch and reuse rendered cards in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.metrics import Metrics
from hitl.bot.outbound.pacer import Pacer
from hitl.bot.views.blocks import card_text, is_slack_user
from hitl.bot.views.card_cache import CardCache
from hitl.bot.views.group_cards import group_card, group_text, money_fields
from hitl.bot.views.withdrawal import ReceiptsShown
from hitl.engine.config.hitl_yaml import NotifySpec
from hitl.engine.domain.grouping import in_order
from hitl.engine.domain.halts import HaltOrder, acted_on
from hitl.engine.domain.models import Approval, ApprovalKind, Status, Tier
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.domain.records import Claim, MessageRef
from hitl.engine.errors import ClaimRefused, NotFound
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Clock, Store
from hitl.engine.receipts.withdrawing import WITHDRAWABLE

__all__ = ["ONCE_LEASE", "Floor"]

log = logging.getLogger(__name__)

ONCE_LEASE = 60.0
"""Seconds a one-off post's claim (a reminder, a hand-on) is held: how long one whose poster died waits."""


class Floor:
    """What the outbound workers share: the Slack client, the store, the clock, the notify settings, the cards
    rendered, and the stop switch as this process reads it."""

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
        cards: CardCache,
    ) -> None:
        self.client = client
        self.store = store
        self.clock = clock
        self.spec = spec
        """hitl.yaml's ``slack:`` section: channels, grouping, reminders."""
        self.default_channel = default_channel
        self.replica = replica
        """This process's name as a claim's holder."""
        self.metrics = metrics
        self.cards = cards
        """The cards this process rendered, by approval version (every update of a version reuses its card)."""
        self.switch = StopSwitch.shared(store, clock)
        """The stop switch as this process reads it (shared with the gates: at most one store read per 0.5 s)."""
        self.on_card: list[Callable[[Approval], Awaitable[None]]] = []
        """Called with the approval each time its card is posted or brought up to date (the Home tabs follow)."""
        self.withdrawable = False
        """Whether receipts are issued (``receipts:`` in hitl.yaml), so a decided card may offer Withdraw."""

    def pacer(self) -> Pacer | None:
        """The client's pacer (None for a client that is not paced: tests of a worker alone)."""
        pacer = getattr(self.client, "pacer", None)
        return pacer if isinstance(pacer, Pacer) else None

    def working(self) -> AbstractContextManager[None]:
        """A worker's stretch of call after call: busy for the pacer between its calls (see ``Pacer.settled``)."""
        pacer = self.pacer()
        return pacer.working() if pacer is not None else contextlib.nullcontext()

    def channel_for(self, a: Approval) -> str | None:
        """The channel ``a``'s card goes to: its role's, its tier's, the approval channel, or the default. A ``self``
        approval's card goes to its one person, as a message from the app (Slack opens the DM for a user id): a DM
        is updated like any card once decided, where an ephemeral message cannot be updated reliably, and only
        that person sees it (anyone else's click on it would still be refused as not theirs)."""
        if a.tier is Tier.SELF and a.on_behalf_of and is_slack_user(a.on_behalf_of):
            return a.on_behalf_of
        channels = self.spec.channels
        return (
            channels.get(a.required_role or "")
            or channels.get(str(a.tier))
            or self.spec.channel
            or self.default_channel
        )

    async def call(self, method: str, fn: Any, **kwargs: Any) -> Any:
        """``fn(**kwargs)``, the Web API ``method``, counted by outcome in ``/metrics`` (the client paces it)."""
        try:
            resp = await fn(**kwargs)
        except SlackApiError as exc:
            self.metrics.slack_calls.labels(method=method, outcome=str(exc.response.get("error"))).inc()
            raise
        self.metrics.slack_calls.labels(method=method, outcome="ok").inc()
        return resp

    async def once(self, key: str, bound: str) -> Claim | None:
        """The claim to do the one-off thing ``key`` names (a reminder, a hand-on) here, once across replicas and
        restarts; None when it is done, or being done elsewhere. The caller records its outcome (:meth:`done`)."""
        try:
            claim = await self.store.ledger.claim(
                key, action_hash=bound, holder=self.replica, now=self.clock.now(), lease=ONCE_LEASE
            )
        except ClaimRefused:
            return None
        return claim if claim.acquired else None

    async def done(self, key: str, claim: Claim, *, ok: bool = True, **result: str) -> None:
        """Record the outcome of the post ``claim`` held under ``key`` (``result``: where it went, or the error)."""
        await self.store.ledger.record_outcome(
            key, holder=self.replica, attempt=claim.attempt, ok=ok, result=result, now=self.clock.now()
        )

    async def draw(self, members: list[Approval]) -> tuple[str, list[dict[str, Any]]]:
        """What one message shows as of now: its one approval's card, or the group card of its ``members``."""
        now = self.clock.now()
        halt = await self.halt_of(next((a for a in members if a.is_open), members[0]))
        if len(members) == 1:
            receipts = await self.receipts_of(members[0])
            return card_text(members[0]), self.cards.card(members[0], now=now, halt=halt, receipts=receipts)
        declared = self.cards.declared(members[0].tool) if self.cards.declared is not None else None
        blocks = group_card(
            members,
            now=now,
            halt=halt,
            currencies=money_fields(declared),
            view_of=self.cards.view_of,
            page_of=self.cards.page_of,
        )
        return group_text(members), blocks

    async def receipts_of(self, approval: Approval) -> ReceiptsShown | None:
        """What ``approval``'s card says of its receipts, from its audit trail (the store's withdrawal and a redeem
        are both recorded there, on any replica): None while it could have none out (no receipts issued here, not an
        action's approval, not approved). The first withdrawal names who and why."""
        if not self.withdrawable or approval.kind is not ApprovalKind.ACTION or approval.status not in WITHDRAWABLE:
            return None
        trail = await self.store.audit.entries(approval_id=approval.id)
        withdrawn = next((e for e in trail if e.event == "withdrawn"), None)
        if withdrawn is not None:
            # Its detail is "withdrawal via <surface>: <reason>" (hitl.engine.receipts.withdrawing).
            return ReceiptsShown(withdrawn_by=withdrawn.actor, reason=withdrawn.detail.partition(": ")[2])
        return ReceiptsShown(spent=any(e.event == "redeemed" for e in trail))

    def view(self, approval: Approval) -> Presentation:
        """``approval``'s one view, as its card draws it (the served hitl.yaml's sentences and labels)."""
        if self.cards.view_of is not None:
            return self.cards.view_of(approval)
        declared = self.cards.declared(approval.tool) if self.cards.declared is not None else None
        return present(approval, declared=declared)

    async def permalink(self, ref: MessageRef) -> str | None:
        """The message's link (``chat.getPermalink``); None when Slack cannot give one now, or gives one that is
        not a plain web address (a link never carries characters that could end its element or its mrkdwn)."""
        try:
            resp = await self.call(
                "chat.getPermalink", self.client.chat_getPermalink, channel=ref.channel, message_ts=ref.ts
            )
        except Exception as exc:  # Slack refused, or answered with something that is not JSON: no link, no failure
            log.warning("no permalink for %s/%s: %s", ref.channel, ref.ts, exc)
            return None
        link = str(resp.get("permalink") or "")
        if not link.startswith(("https://", "http://")) or any(c in link for c in "|<> \"'\n"):
            return None
        return link

    async def halt_of(self, approval: Approval) -> HaltOrder | None:
        """The stop switch's order covering a pending approval's tool (its card says so); the process's cached
        orders, not a store read per card."""
        if approval.status is not Status.PENDING:
            return None
        return await self.switch.covering(acted_on(approval))

    async def members(self, ids: Sequence[str], *, known: Approval | None = None) -> list[Approval]:
        """The approvals ``ids`` name as they now stand, in a group card's order; one purged meanwhile is no longer
        shown. ``known``: one of them as the caller already read it (not read again)."""

        async def current(approval_id: str) -> Approval | None:
            if known is not None and approval_id == known.id:
                return known
            try:
                return await self.store.approvals.get(approval_id)
            except NotFound:
                return None

        found = await asyncio.gather(*(current(i) for i in ids))
        return in_order([a for a in found if a is not None])

    async def carded(self, approval: Approval) -> None:
        """Tell the card listeners (the Home tabs) that ``approval``'s card was posted or brought up to date."""
        for listener in self.on_card:
            try:
                await listener(approval)
            except Exception:  # a follower's failure never holds up the cards
                log.exception("a card listener failed for %s", approval.id)
