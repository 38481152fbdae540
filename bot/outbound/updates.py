"""Card updates: durable jobs (the store's job queue), so a crash between a decision and its card update loses
nothing. An update always renders the approval as the store has it *now*, so a late one cannot show a stale state.
A failed update (429 after the SDK's own retries, 5xx, network) is retried with backoff until it lands; its job is
acknowledged only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError

from hitl.bot.outbound.card_job import CARD_JOB
from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.pacer import urgent
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import MessageRef
from hitl.engine.errors import EngineError
from hitl.engine.process.tasks import Outages

__all__ = ["CARD_JOB", "CardUpdates"]

log = logging.getLogger(__name__)

_RETRYABLE = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


@dataclass
class _Retry:
    """One card's pending update: the queue jobs it answers, when to try next, how often it failed."""

    due: float
    jobs: list[str] = field(default_factory=list)
    attempts: int = 0
    urgent: bool = False
    """A halt notice: it goes before every routine update waiting for Slack's pace."""


class CardUpdates:
    """The worker that applies queued card updates (any replica takes over the jobs one that died left)."""

    def __init__(self, floor: Floor, *, backoff: Callable[[int], float], lease: float, poll: float) -> None:
        self.floor = floor
        self.backoff = backoff
        """Seconds a card whose update failed ``n`` times waits before the next try."""
        self.lease = lease
        """Seconds a claimed update job is held before another replica may take it over."""
        self.poll = poll
        """Seconds between looks at the queue when nothing woke the worker (a dead replica's jobs)."""
        self.queue_outages = Outages("the card-update queue", every=backoff(0), logger=log)
        """The worker's outages (the store away), said once each and counted in ``/metrics``."""
        floor.metrics.watch(self.queue_outages)
        self._wake = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()

    async def changed(self, approval: Approval, *, queued: bool = False) -> None:
        """Bring ``approval``'s card up to date; ``queued``: its job is in the store already (a decision)."""
        # Durable, so a crash or restart between the change and the card update loses nothing: any replica picks
        # the job up (after its lease, if the one that took it died). A decision queued it in its own step.
        if not queued:
            await self.floor.store.jobs.enqueue(CARD_JOB, {"approval_id": approval.id}, now=self.floor.clock.now())
        self.kick()

    async def queue_urgent(self, approval: Approval) -> None:
        """Queue ``approval``'s card update ahead of every routine one (a halt notice); :meth:`kick` applies it."""
        job = {"approval_id": approval.id, "urgent": True}
        await self.floor.store.jobs.enqueue(CARD_JOB, job, now=self.floor.clock.now())

    def kick(self) -> None:
        """Make sure the update loop is running and looks at the queue now."""
        self._idle.clear()
        self._wake.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._run(), name="hitl-card-updates")

    async def idle(self) -> None:
        """Wait until no update is queued or retrying here."""
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the worker (its unacknowledged jobs stay queued for the next process)."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def _run(self) -> None:
        """Apply queued card updates. A card whose update fails waits out its own backoff while the others go on;
        its jobs stay unacknowledged (durable) until it lands."""
        loop = asyncio.get_running_loop()
        retrying: dict[str, _Retry] = {}
        done: list[str] = []  # jobs whose card update landed: acknowledged together, one store call per pass
        store, queue = self.floor.store, self.queue_outages
        while True:
            self._wake.clear()
            with self.floor.working():  # busy for the pacer until this pass is done (not while it waits)
                drawn: set[MessageRef] = set()  # messages this pass brought up to date (each drawn once per pass)
                try:
                    jobs = await store.jobs.claim(
                        self.floor.replica, kind=CARD_JOB, limit=50, now=self.floor.clock.now(), lease=self.lease
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
                        await store.jobs.ack(*done)
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
        floor = self.floor
        shown = await floor.store.messages.card(approval_id)
        if shown is None:
            return
        ref, current = shown
        if ref in drawn:
            return
        ids = await floor.store.messages.shown_on(ref)
        members = await floor.members(ids, known=current) if len(ids) > 1 else [current]
        text, blocks = await floor.draw(members)
        if len(members) == 1 and current.superseded_by is not None:
            # Under the story's last line, above the untrusted evidence: the link stays apart from it.
            at = next(
                (i + 1 for i, b in enumerate(blocks) if str(b.get("block_id", "")).startswith("hitl_outcome:")),
                len(blocks),
            )
            blocks = [*blocks[:at], *await self._replaced(current, current.superseded_by), *blocks[at:]]
        try:
            await floor.call(
                "chat.update", floor.client.chat_update, channel=ref.channel, ts=ref.ts, text=text, blocks=blocks
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in _RETRYABLE or exc.response.status_code >= 500 or exc.response.status_code == 429:
                raise
            log.error("Slack refused the card update for %s: %s", approval_id, error)
        drawn.add(ref)
        await floor.carded(current)

    async def _replaced(self, approval: Approval, new_id: str) -> list[dict[str, Any]]:
        """The line a replaced card ends with, linking to the card of the approval that replaced it (none while
        that card is not posted: its post brings this card up to date again)."""
        moved = await self.floor.store.messages.get(new_id)
        if moved is None:
            return []
        link = await self.floor.permalink(moved)
        to: list[dict[str, Any]] = (
            [{"type": "link", "url": link, "text": "decide it on the new card"}]
            if link is not None
            else [
                {"type": "text", "text": "decide it on the new card in "},
                {"type": "channel", "channel_id": moved.channel},
            ]
        )
        # Rich text: the one live element is the link (the channel, when Slack gave no link); nothing is markup.
        line = [{"type": "emoji", "name": "arrows_counterclockwise"}, {"type": "text", "text": " Replaced: "}, *to]
        section = {"type": "rich_text_section", "elements": line}
        return [{"type": "rich_text", "block_id": f"hitl_replaced:{approval.id}", "elements": [section]}]
