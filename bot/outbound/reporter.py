"""SlackReporter: how a run went on after a decision, told in the card's thread (the engine's RunReporter)."""

from __future__ import annotations

import logging

from hitl.bot.outbound.notifier import SlackNotifier
from hitl.bot.views.escape import label
from hitl.engine.domain.models import Approval
from hitl.engine.domain.runs import RunResult, RunStatus

__all__ = ["SlackReporter"]

log = logging.getLogger(__name__)


class SlackReporter:
    """Refreshes the card and replies in its thread when a run completes, fails or cannot continue."""

    def __init__(self, notifier: SlackNotifier) -> None:
        self.notifier = notifier

    async def run_continued(self, approval: Approval, result: RunResult) -> None:
        await self.notifier.approval_changed(approval)
        if result.status is RunStatus.FAILED:
            reason = label(result.reason or "unknown error", 500)
            await self._tell(
                approval, f":warning: The run failed: {reason}. Retry with `hitl resume {result.session_id}`."
            )
        elif result.status is RunStatus.COMPLETED:
            await self._tell(approval, f":checkered_flag: Run `{result.session_id}` completed.", quiet_in_groups=True)

    async def run_blocked(self, approval: Approval, message: str) -> None:
        await self._tell(approval, f":warning: {label(message, 500)}")

    async def _tell(self, approval: Approval, text: str, *, quiet_in_groups: bool = False) -> None:
        """Reply in the thread of ``approval``'s card. On a group card, a completed run is not told (the card's
        tally shows it; a reply per member would queue behind Slack's one post a second), and a reply names the
        member it is about."""
        store = self.notifier.store
        ref = await store.messages.get(approval.id)
        if ref is None:
            return
        if len(await store.messages.shown_on(ref)) > 1:
            if quiet_in_groups:
                return
            text = f"`{approval.id}`: {text}"
        try:
            await self.notifier.client.chat_postMessage(channel=ref.channel, thread_ts=ref.ts, text=text)
        except Exception:  # a thread reply is a courtesy: never let it fail the resume that already happened
            log.exception("could not post to the thread of %s", approval.id)
