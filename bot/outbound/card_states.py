"""The Slack card's delivery state, recorded where the e-mail's is: each card post's answer audited on its
approvals (``card_posted``, or ``card_refused`` with Slack's error code, or ``unreachable`` when Slack did not
answer) and counted in ``/metrics``, so ``hitl show``, the API and the decision page say how an approval reached
people on every channel, from the audit trail rather than from the poster's claim alone."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hitl.bot.metrics import Metrics
from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError
from hitl.engine.ports import Clock, Store

__all__ = ["CARD_POSTED", "CARD_REFUSED", "UNREACHABLE", "CardStates"]

log = logging.getLogger(__name__)

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

    async def _audit(self, a: Approval, event: str, detail: str, outcome: str) -> None:
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
