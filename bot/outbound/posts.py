"""Posting review cards: once per approval, never on the proposer's time, at Slack's pace per channel.

A new approval's card is handed to its channel's worker (one a second each, sustained), so one busy channel does not
hold up the others. A card not posted yet is the approval itself, pending with no message: if this process dies
first, the next sweep (any replica) posts it. A card is posted under an execution claim (``notify:<approval id>``),
so replicas, retries and restarts never post a second card for one approval. Like approvals queued together
(grouping on) share one group card.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError

from hitl.bot.outbound.card_states import UNREACHABLE, CardStates
from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.pacer import POST
from hitl.engine.domain.grouping import group_key, in_order
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import Claim, MessageRef
from hitl.engine.errors import ClaimRefused, EngineError

__all__ = ["CARD_EVENT", "MAX_GROUP", "MIN_GROUP", "POST_LEASE", "CardPosts"]

log = logging.getLogger(__name__)

MIN_GROUP = 3
"""Like approvals queued together that get a group card: two get a card each (as quick to decide, and each card
shows its action whole)."""
MAX_GROUP = 500
"""Members one group card holds at most (its digest, its "View all"); a longer flood starts another."""
CARD_EVENT = "hitl_card"
"""The metadata event type every card and group card carries, with the ids of the approvals it shows: a poster that
took over the claim of one that died finds there a card Slack took but nobody recorded, instead of posting it again."""
NAMED_ON_CARD = 50
"""Approval ids a card's metadata names at most (a group card of more names its first 50: a member beyond them whose
poster died at the instant Slack answered gets a second card rather than none)."""
HISTORY_PAGES = 5
"""Pages of the channel's history read for such a card (200 messages each, back to the approval's creation)."""
POST_LEASE = 20.0
"""Seconds a card post's claim is held without renewal (renewed while the post waits for Slack): how long a card
whose poster died waits before another process posts it."""


class CardPosts:
    """The per-channel workers that post cards and group cards. ``changed``: queues a card update (an approval
    that moved while its card was being posted is drawn again as it now stands)."""

    def __init__(self, floor: Floor, *, changed: Callable[[Approval], Awaitable[None]]) -> None:
        self.floor = floor
        self.changed = changed
        self.states = CardStates(floor.store, floor.clock, floor.metrics, replica=floor.replica)
        """Each post's answer, audited and counted (the card's delivery state beside the e-mail's)."""
        self.renew_every = POST_LEASE / 3
        """Real seconds between renewals of a waiting card post's claim."""
        self._posts: dict[str, deque[Approval]] = {}  # channel -> cards waiting to be posted there, in order
        self._posting: set[str] = set()  # approval ids queued or being posted (queued once)
        self._posters: dict[str, asyncio.Task[None]] = {}
        self._unrecorded: deque[tuple[Approval, str]] = deque()  # cards queued, their queueing not yet recorded
        self._recorder: asyncio.Task[None] | None = None

    def queue(self, approval: Approval) -> None:
        """Post ``approval``'s card on its channel's worker, after the cards queued there before it."""
        channel = self.floor.channel_for(approval)
        if channel is None:
            log.warning("no approval channel configured; %s is only visible through /hitl pending", approval.id)
            return
        if approval.id in self._posting:
            return
        self._posting.add(approval.id)
        self._posts.setdefault(channel, deque()).append(approval)
        self._unrecorded.append((approval, channel))  # recorded by a worker of its own: queueing never waits on it
        if self._recorder is None or self._recorder.done():
            self._recorder = asyncio.create_task(self._record_queued(), name="hitl-cards-queued")
        worker = self._posters.get(channel)
        if worker is None or worker.done():
            self._posters[channel] = asyncio.create_task(self._post_queued(channel), name=f"hitl-cards-{channel}")

    def workers(self) -> list[asyncio.Task[None]]:
        """The channel workers still posting, and the one recording cards queued (none: every queued card was
        taken)."""
        recording = [self._recorder] if self._recorder is not None and not self._recorder.done() else []
        return [*self._posters.values(), *recording]

    async def post_card(self, approval: Approval) -> MessageRef | None:
        """Post the card unless it was posted (or is being posted) already. Returns where it is."""
        held = await self._claim_card(approval)
        if isinstance(held, Claim):
            return await self._publish([(approval, held)])
        return held

    async def post_group(self, members: list[Approval]) -> MessageRef | None:
        """Post one group card for the ``members`` this process may post (the others are posted, or being
        posted, elsewhere); a single one left gets its own card. Returns where they are."""
        held: list[tuple[Approval, Claim]] = []
        ref: MessageRef | None = None
        for a in members:
            got = await self._claim_card(a)
            if isinstance(got, Claim):
                held.append((a, got))
            else:
                ref = ref or got
        return await self._publish(held) if held else ref

    async def _post_queued(self, channel: str) -> None:
        queue = self._posts[channel]
        pacer = self.floor.pacer()
        with self.floor.working():
            while queue:
                if pacer is not None and self.floor.spec.group:
                    await pacer.ready(POST, pacer.channel_of(channel))  # what queued until Slack takes a post goes on
                together = self._take_group(queue)
                try:
                    for a in together:  # its queueing recorded before Slack's answer is (a no-op once recorded)
                        await self.states.queued(a, channel)
                    if len(together) == 1:
                        await self.post_card(together[0])
                    else:
                        await self.post_group(together)
                except Exception:  # the store or Slack away: the approvals stay uncarded, and the sweep posts them
                    log.exception("could not post the card for %s; the sweep tries again", together[0].id)
                finally:
                    self._posting.difference_update(a.id for a in together)
        del self._posts[channel]
        self._posters.pop(channel, None)

    async def _record_queued(self) -> None:
        """Record each queued card's ``queued`` state, apart from the proposer and the channel workers."""
        while self._unrecorded:
            approval, channel = self._unrecorded.popleft()
            try:
                await self.states.queued(approval, channel)
            except Exception:  # its channel's worker records it before posting it
                log.exception("could not record that the card of %s was queued", approval.id)

    def _take_group(self, queue: deque[Approval]) -> list[Approval]:
        """The next card's approvals: the first queued, and (grouping on) every queued one it groups with."""
        first = queue.popleft()
        key = group_key(first) if self.floor.spec.group else None
        if key is None:
            return [first]
        together = [first, *(a for a in queue if group_key(a) == key)][:MAX_GROUP]
        if len(together) < MIN_GROUP:
            return [first]
        taken = {a.id for a in together}
        kept = [a for a in queue if a.id not in taken]
        queue.clear()
        queue.extend(kept)
        return together

    async def _claim_card(self, approval: Approval) -> Claim | MessageRef | None:
        """The claim to post ``approval``'s card, or where its card already is (None: not now, or elsewhere)."""
        floor = self.floor
        if floor.channel_for(approval) is None:
            log.warning("no approval channel configured; %s is only visible through /hitl pending", approval.id)
            return None
        key = f"notify:{approval.id}"
        try:
            claim = await floor.store.ledger.claim(
                key,
                action_hash=approval.action_hash,
                holder=floor.replica,
                now=floor.clock.now(),
                lease=POST_LEASE,
                retry_failed=True,
            )
        except ClaimRefused:
            return None  # another replica is posting it right now
        if not claim.acquired:
            return await floor.store.messages.get(approval.id)
        existing = await floor.store.messages.get(approval.id)
        if existing is None and claim.recovered:  # its poster died: perhaps after Slack took the card
            existing = await self._posted_unrecorded(approval)
            if existing is not None:
                await floor.store.messages.set(approval.id, existing)
        if existing is not None:  # posted by a holder that died before recording its outcome
            await floor.done(key, claim, channel=existing.channel, ts=existing.ts)
            if len(await floor.store.messages.shown_on(existing)) > 1:
                await self.changed(approval)  # a group it died drawing: drawn again from what it recorded
            return existing
        return claim

    async def _publish(self, held: list[tuple[Approval, Claim]]) -> MessageRef | None:
        """Post one message for the approvals claimed in ``held``: a card, or a group card for several."""
        floor = self.floor
        channel = floor.channel_for(held[0][0])
        assert channel is not None  # _claim_card claimed only approvals that have a channel
        members = in_order(await asyncio.gather(*(floor.store.approvals.get(a.id) for a, _ in held)))
        claims = [(f"notify:{a.id}", claim) for a, claim in held]
        text, blocks = await floor.draw(members)
        try:
            named = " ".join(a.id for a in members[:NAMED_ON_CARD])
            post = floor.call(
                "chat.postMessage",
                floor.client.chat_postMessage,
                channel=channel,
                text=text,
                blocks=blocks,
                metadata={"event_type": CARD_EVENT, "event_payload": {"approvals": named, "members": len(members)}},
            )
            resp = await self._renewing(claims, post)
        except ClaimRefused:
            return None  # taken over by another replica, which posts it
        except SlackApiError as exc:
            for key, claim in claims:
                await floor.done(key, claim, ok=False, error=str(exc.response.get("error")))
            log.error("could not post the card for %s: %s", members[0].id, exc.response.get("error"))
            await self.states.refused(members, channel, str(exc.response.get("error")))
            return None
        except (aiohttp.ClientError, OSError, TimeoutError):  # Slack did not answer: the sweep posts it later
            await self.states.refused(members, channel, UNREACHABLE)
            raise
        ref = MessageRef(channel=str(resp["channel"]), ts=str(resp["ts"]))
        for a in members:  # every member is on the message before any claim says it was posted
            await floor.store.messages.set(a.id, ref)
        for key, claim in claims:
            await floor.done(key, claim, channel=ref.channel, ts=ref.ts)
        await self.states.posted(members, ref.channel)
        drawn = {a.id: a for a, _ in held}
        for current in members:
            floor.metrics.approval_requested(current)
            await floor.carded(current)
        moved = [a for a in members if a.version != drawn[a.id].version or not a.is_open]
        if moved:
            await self.changed(moved[0])  # one update shows every member as it now stands
        await self._link_replaced(members)
        return ref

    async def _posted_unrecorded(self, approval: Approval) -> MessageRef | None:
        """The card Slack holds for ``approval`` though no process recorded it (its poster died the instant Slack
        answered), found by its metadata in the channel's history; None when there is none, or it cannot be read
        (then the card is posted: a second card is better than none)."""
        floor = self.floor
        channel = floor.channel_for(approval)
        assert channel is not None  # only approvals with a channel are claimed
        cursor = ""
        for _ in range(HISTORY_PAGES):
            try:
                page = await floor.call(
                    "conversations.history",
                    floor.client.conversations_history,
                    channel=channel,
                    oldest=f"{approval.created_at - 1:.6f}",
                    limit=200,
                    include_all_metadata=True,
                    cursor=cursor or None,
                )
            except SlackApiError as exc:
                log.warning(
                    "could not read %s's history to find %s's card (%s): posting it; a card may show twice "
                    "(name channels by id in hitl.yaml; the app needs channels:history and groups:history)",
                    channel,
                    approval.id,
                    exc.response.get("error"),
                )
                return None
            for message in page.get("messages") or []:
                meta = message.get("metadata") or {}
                named = str((meta.get("event_payload") or {}).get("approvals", "")).split()
                if meta.get("event_type") == CARD_EVENT and approval.id in named:
                    return MessageRef(channel=channel, ts=str(message["ts"]))
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not page.get("has_more") or not cursor:
                return None
        return None

    async def _link_replaced(self, members: list[Approval]) -> None:
        """Bring up to date the card of each approval a member replaced: now that the new card exists, the old one
        links to it (its update may have been drawn before this post, without the link)."""
        for a in members:
            if a.supersedes is None:
                continue
            try:
                await self.changed(await self.floor.store.approvals.get(a.supersedes))
            except EngineError as exc:  # the card is posted; the old one keeps saying where the approval went
                log.warning("could not link the card %s replaced: %s", a.supersedes, exc)

    async def _renewing(self, claims: list[tuple[str, Claim]], call: Awaitable[Any]) -> Any:
        """``call``, the post's claims renewed while it waits (a ``Retry-After`` can outlast a claim's lease: a
        replica taking a claim over then would post the card a second time)."""
        floor = self.floor
        task = asyncio.ensure_future(call)
        if (pacer := floor.pacer()) is not None:
            pacer.lend(task)  # this worker waits for Slack's pace while its post does
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.renew_every)
                if done:
                    return task.result()
                for key, claim in claims:
                    renewed = await floor.store.ledger.renew(
                        key, holder=floor.replica, attempt=claim.attempt, now=floor.clock.now(), lease=POST_LEASE
                    )
                    if not renewed:  # taken over (this process stalled past the lease): the other holder posts it
                        raise ClaimRefused(f"the card post for {key} was taken over", key=key)
        finally:  # taken over, or this worker cancelled (shutdown): the post goes no further
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
