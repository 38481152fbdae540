"""SlackNotifier: posts review cards once, keeps them current, and never loses an update.

* Nothing that records waits on Slack: a new approval's card, an FYI and a card update are handed to the bot's
  own workers and sent as Slack's limits allow (:mod:`hitl.bot.pacer`). A card not posted yet is the approval
  itself, pending with no message: if this process dies first, the next sweep (any replica) posts it.
* A card is posted under an execution claim (``notify:<approval id>``), so replicas, retries and restarts
  never post a second card for one approval. Cards queue per channel (one a second each, sustained), so one
  busy channel does not hold up the others.
* Card updates are durable jobs (the store's job queue), so a crash between a decision and its card update
  loses nothing. An update always renders the approval as the store has it *now*, so a late one cannot show
  a stale state. A failed update (429 after the SDK's own retries, 5xx, network) is retried with backoff
  until it lands; its job is acknowledged only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.bot.arguments import Declared
from hitl.bot.blocks import card_text, value_box, when
from hitl.bot.card_cache import CardCache
from hitl.bot.escape import label
from hitl.bot.group_cards import group_card, group_text, money_fields
from hitl.bot.metrics import Metrics
from hitl.bot.pacer import POST, urgent
from hitl.engine.config.hitl_yaml import NotifySpec
from hitl.engine.domain.display import show
from hitl.engine.domain.grouping import group_key, in_order
from hitl.engine.domain.halts import EVERY_TOOL, HaltOrder, acted_on
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.practice import POST_AFTER, is_practice
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.records import AuditEntry, Claim, MessageRef
from hitl.engine.domain.tally import Outcome, counts_for
from hitl.engine.errors import ClaimRefused, EngineError, NotFound
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Clock, Store
from hitl.engine.process.tasks import Outages
from hitl.engine.storage.paging import every_pending
from hitl.engine.subscribers.events import FYI_JOB

__all__ = ["SlackNotifier"]


@dataclass
class _Retry:
    """One card's pending update: the queue jobs it answers, when to try next, how often it failed."""

    due: float
    jobs: list[str] = field(default_factory=list)
    attempts: int = 0
    urgent: bool = False
    """A halt notice: it goes before every routine update waiting for Slack's pace."""


log = logging.getLogger(__name__)
CARD_JOB = "card"
"""The durable job that brings an approval's card up to date (queued by a decision's own store step)."""
MIN_GROUP = 3
"""Like approvals queued together that get a group card: two get a card each (as quick to decide, and each card
shows its action whole)."""
MAX_GROUP = 500
"""Members one group card holds at most (its digest, its "View all"); a longer flood starts another."""
POST_LEASE = 20.0
"""Seconds a card post's claim is held without renewal (renewed while the post waits for Slack): how long a card
whose poster died waits before another process posts it."""
_RETRYABLE = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


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
    ) -> None:
        self.client = client
        self.store = store
        self.clock = clock
        self.spec = spec
        self.default_channel = default_channel
        self.replica = replica
        self.metrics = metrics
        self.backoff = backoff
        self.lease = lease
        self.poll = poll
        self.renew_every = POST_LEASE / 3
        """Real seconds between renewals of a waiting card post's claim."""
        self.cards = CardCache(declared=declared, view_of=view_of)
        """The cards this process rendered, by approval version (every update of a version reuses its card)."""
        self.queue_outages = Outages("the card-update queue", every=backoff(0), logger=log)
        """The card-update worker's outages (the store away), said once each and counted in ``/metrics``."""
        metrics.watch(self.queue_outages)
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._sweep_cursor: str | None = None
        self._posts: dict[str, deque[Approval]] = {}  # channel -> cards waiting to be posted there, in order
        self._posting: set[str] = set()  # approval ids queued or being posted (queued once)
        self._posters: dict[str, asyncio.Task[None]] = {}
        self._fyi_worker: asyncio.Task[None] | None = None
        self._fyi_again = False
        self.on_card: list[Callable[[Approval], Awaitable[None]]] = []
        """Called with the approval each time its card is posted or brought up to date (the Home tabs follow)."""
        self.on_halts: list[Callable[[], Awaitable[None]]] = []
        """Called when the stop switch's orders changed (the Home tabs show them)."""
        self._halts: dict[str, HaltOrder] | None = None
        self.switch = StopSwitch.shared(store, clock)
        self.members_of: Callable[[str], Sequence[str]] = lambda role: ()
        """The members of a role as ``hitl.yaml`` lists them (Slack user and user-group ids): whom a hand-on
        mentions."""
        """The stop switch as this process reads it (shared with the gates: at most one store read per 0.5 s)."""

    # -- Notifier protocol ----------------------------------------------------------------------------------
    decision_jobs = (CARD_JOB,)

    def channel_for(self, a: Approval) -> str | None:
        channels = self.spec.channels
        return (
            channels.get(a.required_role or "")
            or channels.get(str(a.tier))
            or self.spec.channel
            or self.default_channel
        )

    async def approval_requested(self, approval: Approval) -> None:
        self.queue_card(approval)  # posted by this channel's worker, never on the proposer's time

    def queue_card(self, approval: Approval) -> None:
        """Post ``approval``'s card on its channel's worker, after the cards queued there before it."""
        channel = self.channel_for(approval)
        if channel is None:
            log.warning("no approval channel configured; %s is only visible through /hitl pending", approval.id)
            return
        if approval.id in self._posting:
            return
        self._posting.add(approval.id)
        self._posts.setdefault(channel, deque()).append(approval)
        worker = self._posters.get(channel)
        if worker is None or worker.done():
            self._posters[channel] = asyncio.create_task(self._post_queued(channel), name=f"hitl-cards-{channel}")

    async def _post_queued(self, channel: str) -> None:
        queue = self._posts[channel]
        pacer = getattr(self.client, "pacer", None)
        while queue:
            if pacer is not None and self.spec.group:
                await pacer.ready(POST, pacer.channel_of(channel))  # what queued until Slack takes a post goes on it
            together = self._take_group(queue)
            try:
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

    def _take_group(self, queue: deque[Approval]) -> list[Approval]:
        """The next card's approvals: the first queued, and (grouping on) every queued one it groups with."""
        first = queue.popleft()
        key = group_key(first) if self.spec.group else None
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

    async def approval_changed(self, approval: Approval, *, queued: bool = False) -> None:
        # Durable, so a crash or restart between the change and the card update loses nothing: any replica picks
        # the job up (after its lease, if the one that took it died). A decision queued it in its own step.
        if not queued:
            await self.store.jobs.enqueue(CARD_JOB, {"approval_id": approval.id}, now=self.clock.now())
        self.kick()

    def kick(self) -> None:
        """Make sure the update loop is running and looks at the queue now."""
        self._idle.clear()
        self._wake.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run_updates(), name="hitl-card-updates")

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None:
        # Its durable job was queued with the call's audit entry: this process's FYI worker posts it as Slack
        # allows, and the call that ran never waits on it.
        self.kick_fyis()

    def kick_fyis(self) -> None:
        """Make sure the FYI worker is posting the queued FYIs."""
        self._fyi_again = True
        if self._fyi_worker is None or self._fyi_worker.done():
            self._fyi_worker = asyncio.create_task(self._post_fyis_queued(), name="hitl-fyis")

    async def _post_fyis_queued(self) -> None:
        while self._fyi_again:
            self._fyi_again = False
            try:
                while await self.post_fyis(limit=10):
                    pass
            except Exception:  # the store away: the jobs stay queued; the sweep posts them
                log.exception("could not post the queued FYIs; the sweep tries again")

    async def _post_fyi(self, *, tool: str, args: dict[str, Any], reason: str) -> None:
        channel = self.spec.channels.get("notify") or self.spec.channel or self.default_channel
        if not channel:
            return
        text = f":information_source: *{label(tool, 80)}* ran without review ({label(reason, 300)})"
        shown = show(args)  # the exact arguments, typed and marked as a card shows them
        await self._call(
            "chat.postMessage",
            self.client.chat_postMessage,
            channel=channel,
            text=f"{tool} ran without review",
            blocks=[
                {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}},
                value_box("hitl_fyi_args", shown.text, 2000),
            ],
        )

    async def post_alert(self, text: str, *, channel: str | None = None) -> None:
        """A fired or resolved alert, to ``channel`` (hitl.yaml's ``alerts.channel``) or the approval channel."""
        target = channel or self.spec.channel or self.default_channel
        if not target:
            log.warning("no channel for alerts (set alerts.channel in hitl.yaml): %s", text)
            return
        with urgent():  # an alert never waits behind a backlog of cards
            await self._call(
                "chat.postMessage",
                self.client.chat_postMessage,
                channel=target,
                text=text,
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": label(text, 2900), "verbatim": True}}],
            )

    # -- posting -----------------------------------------------------------------------------------------------
    async def post_card(self, approval: Approval) -> MessageRef | None:
        """Post the card unless it was posted (or is being posted) already, or it is a practice approval whose
        moment has not come (the sweep posts it then). Returns where it is."""
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

    async def _claim_card(self, approval: Approval) -> Claim | MessageRef | None:
        """The claim to post ``approval``'s card, or where its card already is (None: not now, or elsewhere)."""
        due = approval.metadata.get(POST_AFTER) if is_practice(approval) else None
        if isinstance(due, int | float) and self.clock.now() < due:
            return None
        if self.channel_for(approval) is None:
            log.warning("no approval channel configured; %s is only visible through /hitl pending", approval.id)
            return None
        key = f"notify:{approval.id}"
        try:
            claim = await self.store.ledger.claim(
                key,
                action_hash=approval.action_hash,
                holder=self.replica,
                now=self.clock.now(),
                lease=POST_LEASE,
                retry_failed=True,
            )
        except ClaimRefused:
            return None  # another replica is posting it right now
        if not claim.acquired:
            return await self.store.messages.get(approval.id)
        existing = await self.store.messages.get(approval.id)
        if existing is not None:  # posted by a holder that died before recording its outcome
            await self._done(key, claim, channel=existing.channel, ts=existing.ts)
            if len(await self.store.messages.shown_on(existing)) > 1:
                await self.approval_changed(approval)  # a group it died drawing: drawn again from what it recorded
            return existing
        return claim

    async def _publish(self, held: list[tuple[Approval, Claim]]) -> MessageRef | None:
        """Post one message for the approvals claimed in ``held``: a card, or a group card for several."""
        channel = self.channel_for(held[0][0])
        assert channel is not None  # _claim_card claimed only approvals that have a channel
        members = in_order(await asyncio.gather(*(self.store.approvals.get(a.id) for a, _ in held)))
        claims = [(f"notify:{a.id}", claim) for a, claim in held]
        text, blocks = await self._draw(members)
        try:
            post = self._call(
                "chat.postMessage", self.client.chat_postMessage, channel=channel, text=text, blocks=blocks
            )
            resp = await self._renewing(claims, post)
        except ClaimRefused:
            return None  # taken over by another replica, which posts it
        except SlackApiError as exc:
            for key, claim in claims:
                await self._done(key, claim, ok=False, error=str(exc.response.get("error")))
            log.error("could not post the card for %s: %s", members[0].id, exc.response.get("error"))
            return None
        ref = MessageRef(channel=str(resp["channel"]), ts=str(resp["ts"]))
        for a in members:  # every member is on the message before any claim says it was posted
            await self.store.messages.set(a.id, ref)
        for key, claim in claims:
            await self._done(key, claim, channel=ref.channel, ts=ref.ts)
        drawn = {a.id: a for a, _ in held}
        for current in members:
            self.metrics.approval_requested(current)
            await self._carded(current)
        moved = [a for a in members if a.version != drawn[a.id].version or not a.is_open]
        if moved:
            await self.approval_changed(moved[0])  # one update shows every member as it now stands
        return ref

    async def _draw(self, members: list[Approval]) -> tuple[str, list[dict[str, Any]]]:
        """What one message shows as of now: its one approval's card, or the group card of its ``members``."""
        now = self.clock.now()
        halt = await self.halt_of(next((a for a in members if a.is_open), members[0]))
        if len(members) == 1:
            return card_text(members[0]), self.cards.card(members[0], now=now, halt=halt)
        declared = self.cards.declared(members[0].tool) if self.cards.declared is not None else None
        blocks = group_card(members, now=now, halt=halt, currencies=money_fields(declared), view_of=self.cards.view_of)
        return group_text(members), blocks

    async def _renewing(self, claims: list[tuple[str, Claim]], call: Awaitable[Any]) -> Any:
        """``call``, the post's claims renewed while it waits (a ``Retry-After`` can outlast a claim's lease: a
        replica taking a claim over then would post the card a second time)."""
        task = asyncio.ensure_future(call)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.renew_every)
                if done:
                    return task.result()
                for key, claim in claims:
                    renewed = await self.store.ledger.renew(
                        key, holder=self.replica, attempt=claim.attempt, now=self.clock.now(), lease=POST_LEASE
                    )
                    if not renewed:  # taken over (this process stalled past the lease): the other holder posts it
                        raise ClaimRefused(f"the card post for {key} was taken over", key=key)
        finally:  # taken over, or this worker cancelled (shutdown): the post goes no further
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def _done(self, key: str, claim: Claim, *, ok: bool = True, **result: str) -> None:
        await self.store.ledger.record_outcome(
            key, holder=self.replica, attempt=claim.attempt, ok=ok, result=result, now=self.clock.now()
        )

    async def remind(self, approval: Approval) -> bool:
        """Post one reminder in the card's thread (once across replicas and restarts; a group card gets one for
        all its members, when the first of them nears its expiry)."""
        ref = await self.store.messages.get(approval.id)
        if ref is None:
            return False
        shown = await self.store.messages.shown_on(ref)
        key, bound = f"remind:{approval.id}", approval.action_hash
        if len(shown) > 1:  # one reminder per group card, whichever member's expiry brings it
            key, bound = f"remind:{min(shown)}", hashlib.sha256(f"{ref.channel}|{ref.ts}".encode()).hexdigest()
        claim = await self._once(key, bound)
        if claim is None:
            return False
        role = label(approval.required_role or "any reviewer", 40)
        if len(shown) > 1:
            text = (
                f":alarm_clock: Requests on this card start expiring {when(approval.expires_at)} and still need "
                f"{role} approval. Open the card to decide them."
            )
        else:
            text = (
                f":alarm_clock: `{approval.id}` expires {when(approval.expires_at)} and still needs "
                f"{role} approval ({len(approval.approvers)} of {approval.quorum})."
            )
        await self._call(
            "chat.postMessage", self.client.chat_postMessage, channel=ref.channel, thread_ts=ref.ts, text=text
        )
        await self._done(key, claim)
        return True

    async def _once(self, key: str, bound: str) -> Claim | None:
        """The claim to do the one-off thing ``key`` names (a reminder, a hand-on) here, once across replicas and
        restarts; None when it is done, or being done elsewhere. The caller records its outcome (``_done``)."""
        try:
            claim = await self.store.ledger.claim(
                key, action_hash=bound, holder=self.replica, now=self.clock.now(), lease=60.0
            )
        except ClaimRefused:
            return None
        return claim if claim.acquired else None

    async def hand_on(self, approval: Approval, ref: MessageRef) -> bool:
        """Hand an unanswered approval on to its backup role, once across replicas and restarts: audited, its card
        posted again with live buttons and the backup role's members mentioned (the earlier card says where it
        went), their Home tabs brought up to date. Its original reviewers may still decide; votes cast still
        count. Returns whether this call handed it on."""
        key = f"handon:{approval.id}"
        claim = await self._once(key, approval.action_hash)
        if claim is None:
            return False
        backup = approval.backup_role or ""
        await self.store.audit.append(
            AuditEntry(
                at=self.clock.now(),
                actor="system",
                event="handed_on",
                approval_id=approval.id,
                version=approval.version,
                action_hash=approval.action_hash,
                detail=f"handed on to {backup} before it expires; {approval.required_role or 'its reviewers'} may "
                f"still decide ({len(approval.approvers)} of {approval.quorum} votes cast)"[:500],
            )
        )
        current = await self.store.approvals.get(approval.id)
        text, blocks = await self._draw([current])
        mention = " ".join(_mention(m) for m in self.members_of(backup) if _mention(m)) or f"the {backup} role"
        notice = {
            "type": "section",
            "block_id": f"hitl_handed_on:{approval.id}",
            "text": {
                "type": "mrkdwn",
                "text": f":arrow_right_hook: *Handed on to {label(backup, 40)}* before it expires: {mention}, "
                f"this waits on you too.",
            },
        }
        posted = await self._call(
            "chat.postMessage",
            self.client.chat_postMessage,
            channel=ref.channel,
            text=f"Handed on to {backup[:40]}: {text}",
            blocks=[notice, *blocks],
        )
        moved = MessageRef(channel=str(posted["channel"]), ts=str(posted["ts"]))
        await self.store.messages.set(approval.id, moved)
        gone = {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f":arrow_right_hook: `{approval.id}` was handed on to "
                f"{label(backup, 40)}; decide it on the newer card.",
            },
        }
        others = [x for x in await self.store.messages.shown_on(ref) if x != approval.id]
        if others:  # a group card it was on: drawn again without it
            await self.approval_changed(await self.store.approvals.get(others[0]))
        else:
            try:
                await self._call(
                    "chat.update",
                    self.client.chat_update,
                    channel=ref.channel,
                    ts=ref.ts,
                    text=f"Handed on to {backup[:40]}: decide it on the newer card",
                    blocks=[gone],
                )
            except SlackApiError as exc:  # the newer card decides it; the older keeps buttons bound to its version
                log.warning("could not mark the earlier card of %s: %s", approval.id, exc.response.get("error"))
        await self._done(key, claim, channel=moved.channel, ts=moved.ts)
        now = self.clock.now()
        if not is_practice(approval):  # a practice copy counts only in the practice measures
            counts = counts_for(approval.tool, str(approval.tier), Outcome.HANDED_ON, now=now)
            await self.store.tallies.add(counts, now=now)
        await self._carded(current)  # the backup reviewers' Home tabs
        return True

    async def post_fyis(self, *, limit: int = 10) -> int:
        """Post queued FYIs (``fyi`` jobs: calls told to reviewers that ran here or in processes without Slack),
        at most ``limit``; returns how many were taken."""
        jobs = await self.store.jobs.claim(self.replica, kind=FYI_JOB, limit=limit, now=self.clock.now(), lease=60.0)
        for job in jobs:
            p = job.payload
            try:
                await self._post_fyi(
                    tool=str(p.get("tool", "")), args=dict(p.get("args") or {}), reason=str(p.get("reason", ""))
                )
            except SlackApiError as exc:  # left unacknowledged: another sweep posts it once Slack takes it
                log.warning("could not post an FYI for %s: %s", p.get("tool"), exc.response.get("error"))
                continue
            await self.store.jobs.ack(job.id)
        return len(jobs)

    async def sweep(self, *, pages: int = 5, page_size: int = 200) -> None:
        """Post cards that never made it (approvals created by agent processes, posts that failed), and one
        reminder before expiry; make sure the card-update loop runs (it takes over the updates a replica that
        died left queued). Pages through every pending approval, ``pages`` pages per sweep, resuming where the
        last sweep stopped, so no approval waits behind old ones (a background sweeper)."""
        self.kick_fyis()
        self.kick()  # card updates a replica that died left queued: this process's update loop takes them over
        await self.watch_halts()
        now = self.clock.now()
        before = self.spec.reminder_before
        for _ in range(pages):
            page = await self.store.approvals.list_pending(limit=page_size, cursor=self._sweep_cursor)
            self._sweep_cursor = page.cursor
            refs = await asyncio.gather(*(self.store.messages.get(a.id) for a in page.items))
            for a, ref in zip(page.items, refs, strict=True):
                if ref is None:  # queued together, so the like ones among them can share a group card
                    self.queue_card(a)
            for a, ref in zip(page.items, refs, strict=True):
                if ref is not None and a.handed_on(now) and a.expires_at > now:
                    try:
                        await self.hand_on(a, ref)
                    except (SlackApiError, EngineError) as exc:  # tried again on a later sweep (its claim lapses)
                        log.warning("could not hand %s on yet: %s", a.id, exc)
                if ref is not None and before and 0 < a.expires_at - now <= before:
                    await self.remind(a)
            if page.cursor is None:
                return

    async def watch_created(self, *, wait: float = 5.0) -> None:
        """Card every approval another process creates as soon as the store announces it (Redis pub/sub; SQLite a
        check of the newest row every 50 ms), for as long as it runs. The sweep stays the safety net for a wake-up
        lost to a dropped connection, and for approvals created while no ``hitl serve`` ran."""
        watching = Outages("watching for new approvals", every=wait, logger=log)
        while True:
            try:
                for approval_id in await self.store.approvals.wait_created(timeout=wait):
                    a = await self.store.approvals.get(approval_id)
                    if a.status is Status.PENDING and await self.store.messages.get(a.id) is None:
                        self.queue_card(a)
                watching.ok()
            except Exception as exc:  # the store is away: say so once, try again after a pause
                watching.failed(exc)
                await asyncio.sleep(wait)

    # -- updating ----------------------------------------------------------------------------------------------
    async def flush(self, timeout: float = 30.0) -> None:
        """Wait until every queued card, FYI and card update has landed (tests, shutdown)."""

        async def drained() -> None:
            while True:
                busy = [t for t in (*self._posters.values(), self._fyi_worker) if t is not None and not t.done()]
                if busy:
                    await asyncio.gather(*busy, return_exceptions=True)
                    continue
                await self._idle.wait()
                if not self._posters and (self._fyi_worker is None or self._fyi_worker.done()):
                    return

        await asyncio.wait_for(drained(), timeout)

    async def close(self) -> None:
        workers = [t for t in (self._worker, self._fyi_worker, *self._posters.values()) if t is not None]
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _run_updates(self) -> None:
        """Apply queued card updates. A card whose update fails waits out its own backoff while the others go on;
        its jobs stay unacknowledged (durable) until it lands."""
        loop = asyncio.get_running_loop()
        retrying: dict[str, _Retry] = {}
        done: list[str] = []  # jobs whose card update landed: acknowledged together, one store call per pass
        queue = self.queue_outages
        while True:
            self._wake.clear()
            drawn: set[MessageRef] = set()  # messages this pass brought up to date (each drawn once per pass)
            try:
                jobs = await self.store.jobs.claim(
                    self.replica, kind=CARD_JOB, limit=50, now=self.clock.now(), lease=self.lease
                )
                queue.ok()
            except EngineError as exc:  # the store is down: keep what we hold, try again shortly
                queue.failed(exc)
                jobs = []
                await asyncio.sleep(self.backoff(0))
            for job in jobs:
                approval_id = str(job.payload.get("approval_id", ""))
                entry = retrying.setdefault(approval_id, _Retry(due=loop.time()))
                entry.jobs.append(job.id)
                entry.urgent = entry.urgent or bool(job.payload.get("urgent"))
            for approval_id, entry in sorted(retrying.items(), key=lambda item: not item[1].urgent):
                if entry.due > loop.time():
                    continue
                try:
                    # Several changes queued: one update shows the latest. A halt notice goes ahead of any backlog.
                    with urgent() if entry.urgent else contextlib.nullcontext():
                        await self._update(approval_id, drawn)
                except Exception as exc:  # any failure: this card backs off; the others are not held up
                    log.warning("card update for %s failed (%s); retrying it", approval_id, exc)
                    entry.due = loop.time() + self.backoff(entry.attempts)
                    entry.attempts += 1
                    continue
                done += entry.jobs
                del retrying[approval_id]
                if self._wake.is_set():  # more was queued meanwhile (a halt notice?): take it in before the rest
                    break
            if done:
                try:
                    await self.store.jobs.ack(*done)
                    done.clear()
                except Exception as exc:  # kept, and acknowledged on a later pass; an update shown twice is
                    queue.failed(exc)  # harmless (each shows the approval as it then stands)
                    await asyncio.sleep(self.backoff(0))
                    continue
            if jobs or self._wake.is_set():
                continue  # there may be more queued
            if not retrying:
                self._idle.set()
            # Also poll now and then: a replica that died may have left jobs to take over.
            wait = min([self.poll, *(e.due - loop.time() for e in retrying.values())])
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.0))
            except TimeoutError:
                pass

    async def _update(self, approval_id: str, drawn: set[MessageRef]) -> None:
        """Bring the message showing ``approval_id`` up to date, unless this pass drew it already (``drawn``: a
        group decided together queues one job per member, and one update shows them all)."""
        shown = await self.store.messages.card(approval_id)
        if shown is None:
            return
        ref, current = shown
        if ref in drawn:
            return
        ids = await self.store.messages.shown_on(ref)
        members = await self.members(ids, known=current) if len(ids) > 1 else [current]
        text, blocks = await self._draw(members)
        try:
            await self._call(
                "chat.update", self.client.chat_update, channel=ref.channel, ts=ref.ts, text=text, blocks=blocks
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in _RETRYABLE or exc.response.status_code >= 500 or exc.response.status_code == 429:
                raise
            log.error("Slack refused the card update for %s: %s", approval_id, error)
        drawn.add(ref)
        await self._carded(current)

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

    async def halt_of(self, approval: Approval) -> HaltOrder | None:
        """The stop switch's order covering a pending approval's tool (its card says so); the process's cached
        orders, not a store read per card."""
        if approval.status is not Status.PENDING:
            return None
        return await self.switch.covering(acted_on(approval))

    async def watch_halts(self) -> None:
        """When the stop switch's orders change (given or lifted in any process), bring the cards of the pending
        approvals they cover up to date, and tell the card listeners (the Home tabs)."""
        orders = {o.scope: o for o in await self.switch.orders()}
        before, self._halts = self._halts or {}, orders
        if before == orders:
            return  # at start, cards drawn before a halt given while no server ran are brought up to date
        changed = {s for s in set(before) | set(orders) if before.get(s) != orders.get(s)}
        async for a in every_pending(self.store.approvals):
            if EVERY_TOOL in changed or acted_on(a) in changed:
                job = {"approval_id": a.id, "urgent": True}  # a halt notice: ahead of routine updates
                await self.store.jobs.enqueue(CARD_JOB, job, now=self.clock.now())
        self.kick()
        for listener in self.on_halts:
            await listener()

    async def _carded(self, approval: Approval) -> None:
        for listener in self.on_card:
            try:
                await listener(approval)
            except Exception:  # a follower's failure never holds up the cards
                log.exception("a card listener failed for %s", approval.id)

    async def _call(self, method: str, fn: Any, **kwargs: Any) -> Any:
        try:
            resp = await fn(**kwargs)
        except SlackApiError as exc:
            self.metrics.slack_calls.labels(method=method, outcome=str(exc.response.get("error"))).inc()
            raise
        self.metrics.slack_calls.labels(method=method, outcome="ok").inc()
        return resp


def _mention(member: str) -> str:
    """A role member as a Slack mention: ``<@U…>`` for a person, ``<!subteam^S…>`` for a user group ("" for an id
    Slack does not know, such as ``cli:alice``)."""
    if re.fullmatch(r"[UW][A-Z0-9_]{2,20}", member):
        return f"<@{member}>"
    if re.fullmatch(r"S[A-Z0-9_]{2,20}", member):
        return f"<!subteam^{member}>"
    return ""
