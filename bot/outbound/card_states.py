"""The Slack card's delivery state, recorded where the e-mail's is: each card's queueing for posting
(``card_queued``, once per approval) and each card post's answer audited on its approvals (``card_posted``, or
``card_refused`` with Slack's error code, or ``unreachable`` when Slack did not
answer) and counted in ``/metrics``, so ``hitl show``, the API and the decision page say how an approval reached
people on every channel, from the audit trail rather than from the poster's claim alone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from hitl.bot.metrics import Metrics
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry, Claim
from hitl.engine.errors import ClaimRefused, EngineError
from hitl.engine.ports import Clock, Store

__all__ = ["CARD_POSTED", "CARD_QUEUED", "CARD_REFUSED", "UNREACHABLE", "CardStates"]

log = logging.getLogger(__name__)

CARD_QUEUED = "card_queued"
"""The audit event of a card queued for posting (before Slack is asked: it says the card is on its way while Slack
holds posts under 429s, or is away)."""
CARD_POSTED = "card_posted"
"""The audit event of a card Slack took."""
CARD_REFUSED = "card_refused"
"""The audit event of a card Slack refused (its outcome: Slack's error code) or could not be reached for."""
UNREACHABLE = "unreachable"
"""The outcome of a post that got no answer from Slack (a closed port, a connection reset, a timeout)."""
_KEPT = 10_000
"""Refusals remembered as audited (past that, forgotten at once: a refusal is audited again, never lost)."""


class CardStates:
    """Records each card post's answer for its approvals: every answer counted, each refusal audited once per
    approval and code in this process (the sweep retries a refused card every pass: the trail must not fill)."""

    def __init__(self, store: Store, clock: Clock, metrics: Metrics, *, replica: str) -> None:
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.replica = replica
        self.audited = False
        """Whether answers are audited: only where another channel carries approvals too (``email:``), whose
        delivery they stand beside; with Slack alone the card's own record says it was posted, and every answer is
        still counted."""
        self._refused: set[tuple[str, str]] = set()
        self._queued: set[str] = set()  # approvals whose queueing this process recorded (or saw recorded)
        self._recording = asyncio.Lock()  # one approval's queueing recorded at a time: its poster waits for it

    async def queued(self, approval: Approval, channel: str) -> None:
        """``approval``'s card was queued for posting in ``channel``: counted, and audited, once per approval (the
        sweep queues a card Slack did not take every pass; a claim in the store keeps replicas and restarts from
        recording it again)."""
        async with self._recording:
            await self._queued_once(approval, channel)

    async def _queued_once(self, approval: Approval, channel: str) -> None:
        if approval.id in self._queued:
            return
        if len(self._queued) >= _KEPT:
            self._queued.clear()
        self._queued.add(approval.id)
        if not self.audited:
            self.metrics.cards.labels(outcome="queued").inc()
            return
        claim = await self._first_queued(approval)
        if claim is None:
            return
        self.metrics.cards.labels(outcome="queued").inc()
        if await self._audit(approval, CARD_QUEUED, f"in {channel}", "ok"):  # else its claim lapses for another
            await self._queued_recorded(approval, claim)

    async def posted(self, members: Sequence[Approval], channel: str) -> None:
        """Slack took the card of ``members`` in ``channel``."""
        self.metrics.cards.labels(outcome="posted").inc(len(members))
        for a in members if self.audited else ():
            await self._audit(a, CARD_POSTED, f"in {channel}", "ok")

    async def refused(self, members: Sequence[Approval], channel: str, code: str) -> None:
        """Slack refused the card of ``members`` with ``code`` (or was :data:`UNREACHABLE`)."""
        self.metrics.cards.labels(outcome=code).inc(len(members))
        if not self.audited:
            return
        if len(self._refused) >= _KEPT:
            self._refused.clear()
        for a in members:
            if (a.id, code) in self._refused:
                continue
            self._refused.add((a.id, code))
            await self._audit(a, CARD_REFUSED, f"in {channel}", code)

    async def _first_queued(self, a: Approval) -> Claim | None:
        """The claim to record ``a``'s queueing (None: another process did, or is doing it right now)."""
        try:
            claim = await self.store.ledger.claim(
                f"{CARD_QUEUED}:{a.id}",
                action_hash=a.action_hash,
                holder=self.replica,
                now=self.clock.now(),
                lease=60.0,
            )
        except ClaimRefused:
            return None
        except EngineError:  # the store away: tried again at the next queueing (the sweep's)
            self._queued.discard(a.id)
            log.warning("could not record that the card of %s was queued", a.id)
            return None
        return claim if claim.acquired else None

    async def _queued_recorded(self, a: Approval, claim: Claim) -> None:
        try:
            await self.store.ledger.record_outcome(
                f"{CARD_QUEUED}:{a.id}",
                holder=self.replica,
                attempt=claim.attempt,
                ok=True,
                result={},
                now=self.clock.now(),
            )
        except EngineError:  # its lease lapses: recorded again, never lost
            log.warning("could not close the record that the card of %s was queued", a.id)

    async def _audit(self, a: Approval, event: str, detail: str, outcome: str) -> bool:
        """Append ``event`` to ``a``'s trail; False when the store would not take it (logged)."""
        entry = AuditEntry(
            at=self.clock.now(),
            actor=self.replica,
            event=event,
            approval_id=a.id,
            version=a.version,
            outcome=outcome[:100],
            detail=detail[:500],
        )
        try:
            await self.store.audit.append(entry)
        except EngineError:  # the card's fate is Slack's answer; a lost record of it must not repost the card
            log.warning("could not audit the card of %s (%s)", a.id, outcome)
            return False
        return True
