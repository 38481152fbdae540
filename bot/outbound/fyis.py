"""FYIs: calls that ran without review, told to reviewers. Each is a durable ``fyi`` job queued with the call's
audit entry (here, or in a process without Slack); this worker posts them as Slack allows, and the call that ran
never waits on it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from hitl.bot.outbound.floor import Floor
from hitl.bot.views.blocks import value_box
from hitl.bot.views.escape import label
from hitl.engine.domain.display import show
from hitl.engine.subscribers.events import FYI_JOB

__all__ = ["Fyis"]

log = logging.getLogger(__name__)


class Fyis:
    """The worker posting queued FYIs."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor
        self._worker: asyncio.Task[None] | None = None
        self._again = False

    def kick(self) -> None:
        """Make sure the worker is posting the queued FYIs."""
        self._again = True
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._post_queued(), name="hitl-fyis")

    def worker(self) -> asyncio.Task[None] | None:
        """The worker's task, if it ever ran."""
        return self._worker

    async def post_fyis(self, *, limit: int = 10) -> int:
        """Post queued FYIs (``fyi`` jobs: calls told to reviewers that ran here or in processes without Slack),
        at most ``limit``; returns how many were taken."""
        floor = self.floor
        jobs = await floor.store.jobs.claim(floor.replica, kind=FYI_JOB, limit=limit, now=floor.clock.now(), lease=60.0)
        for job in jobs:
            p = job.payload
            try:
                tool, args, reason = str(p.get("tool", "")), dict(p.get("args") or {}), str(p.get("reason", ""))
                await self._post(tool=tool, args=args, reason=reason)
            except SlackApiError as exc:  # left unacknowledged: another sweep posts it once Slack takes it
                log.warning("could not post an FYI for %s: %s", p.get("tool"), exc.response.get("error"))
                continue
            await floor.store.jobs.ack(job.id)
        return len(jobs)

    async def _post_queued(self) -> None:
        with self.floor.working():
            while self._again:
                self._again = False
                try:
                    while await self.post_fyis(limit=10):
                        pass
                except Exception:  # the store away: the jobs stay queued; the sweep posts them
                    log.exception("could not post the queued FYIs; the sweep tries again")

    async def _post(self, *, tool: str, args: dict[str, Any], reason: str) -> None:
        floor = self.floor
        channel = floor.spec.channels.get("notify") or floor.spec.channel or floor.default_channel
        if not channel:
            return
        text = f":information_source: *{label(tool, 80)}* ran without review ({label(reason, 300)})"
        shown = show(args)  # the exact arguments, typed and marked as a card shows them
        await floor.call(
            "chat.postMessage",
            floor.client.chat_postMessage,
            channel=channel,
            text=f"{tool} ran without review",
            blocks=[
                {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": True}},
                value_box("hitl_fyi_args", shown.text, 2000),
            ],
        )
