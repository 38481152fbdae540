"""The notifier of a process that holds no Slack client (a ``hitl`` command against the store, an agent's process on
``hitl.ApprovalService``): what it changes on an approval that has a Slack card (a decision, a group's, an expiry, a
withdrawal, a cancellation, a drift check's move) queues the card's durable update job, which ``hitl serve``'s
card-update worker draws at its next look at the queue, as it draws the ones a decision in ``hitl serve`` queues.
The card otherwise keeps its live buttons until someone clicks one (the click is refused and draws the card again):
``hitl serve``'s sweep posts the cards of pending approvals and never draws a decided one again.

It loads no Slack client. It queues only for an approval with a card, so a store that no ``hitl serve`` serves
keeps no job nobody takes.
"""

from __future__ import annotations

import logging
from typing import Any

from hitl.bot.outbound.card_job import CARD_JOB
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError
from hitl.engine.ports import Clock, Store

__all__ = ["QueuedCards"]

log = logging.getLogger(__name__)


class QueuedCards:
    """The :class:`hitl.engine.ports.Notifier` of a process without Slack: card updates queued for ``hitl serve``."""

    decision_jobs: tuple[str, ...] = ()
    """Empty: nothing is queued in the decision's own step, where a store no ``hitl serve`` serves (no card) would
    keep a job nobody takes; :meth:`approval_changed` queues the card's job after it, when the approval has a card."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    async def approval_requested(self, approval: Approval) -> None:
        """Nothing: ``hitl serve`` posts the card of an approval another process created as the store announces
        it (and its sweep posts any it missed)."""

    async def approval_changed(self, approval: Approval, *, queued: bool = False) -> None:
        """Queue the update of ``approval``'s card, when it has one (``queued`` says the :attr:`decision_jobs` are in
        the store: they are none here, so it is queued either way). Called after the change is recorded: a failure
        is said, and never undoes it."""
        try:
            if await self.store.messages.get(approval.id) is not None:
                await self.store.jobs.enqueue(CARD_JOB, {"approval_id": approval.id}, now=self.clock.now())
        except EngineError as exc:
            log.warning(
                "%s is changed (recorded), but its Slack card could not be queued to be drawn again (%s): the card "
                "shows it as it was, its buttons included, until it is next drawn (hitl serve's sweep draws no "
                "decided card again; a click on one of them is refused and draws it)",
                approval.id,
                exc.message,
            )

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None:
        """Nothing: the FYI's job was queued with the call's audit entry, and ``hitl serve`` posts it."""
