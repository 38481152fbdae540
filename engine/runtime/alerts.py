"""Alerts, watched by ``hitl serve``: every sweep reads the oversight figures from the store, and each alert that
changes state (fired, resolved) is announced once across replicas: an audit entry, a post to the alerts channel and
a signed webhook event (``alert.fired`` / ``alert.resolved``).

An alert's state lives in the store (a record per alert, saved compare-and-swap, in a space of its own apart from the
runs), so a restart or another replica knows whether it is firing. Each change is claimed in the execution ledger
before it is announced: one replica announces it; one that died halfway has it announced again after the claim's
lease (at least once, never lost).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hitl.engine.config.api import EventKind
from hitl.engine.domain.alerts import AlertFigure, AlertRule, AlertsSpec, Reading, evaluate
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.tally import summarize
from hitl.engine.errors import ClaimRefused, StaleVersion
from hitl.engine.ports import Clock, Store
from hitl.engine.subscribers.events import EventSink

__all__ = ["AlertWatch"]

log = logging.getLogger(__name__)
_CHANGE = "alert-change"


class AlertWatch:
    """Evaluates ``hitl.yaml``'s alerts once per sweep (a :class:`~hitl.engine.runtime.background.Sweeper`).

    Args:
        store: the figures, the alerts' state, the ledger and the audit trail.
        clock: the time source.
        spec: the ``alerts:`` section.
        holder: this replica's name (the ledger claims of the changes it announces).
        events: where webhook events go (None: no subscribers).
        post: posts a line to the alerts channel (None: no Slack in this process).
        builtin: alerts hitl sets itself, beside ``spec``'s (cards undelivered, when ``email:`` is set).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        spec: AlertsSpec,
        *,
        holder: str,
        events: EventSink | None = None,
        post: Callable[[str], Awaitable[None]] | None = None,
        builtin: Sequence[AlertRule] = (),
    ) -> None:
        self.store = store
        self.clock = clock
        self.spec = spec
        self.holder = holder
        self.events = events
        self.post = post
        self.builtin = tuple(builtin)

    async def sweep(self) -> None:
        """Read every alert's figure now; announce the ones that changed state."""
        rules = [*self.spec.rules, *self.builtin]
        if not rules:
            return
        now = self.clock.now()
        rows = summarize(await self.store.tallies.read(since=now - self.spec.window, now=now))
        uncarded = None
        if any(r.figure is AlertFigure.CARDS_UNDELIVERED for r in rules):
            uncarded = await self._oldest(now, uncarded=True)
        readings = evaluate(self.spec, rows, await self._oldest(now), uncarded=uncarded, builtin=self.builtin)
        for reading in readings:
            await self._settle(reading, now)

    async def _oldest(self, now: float, *, uncarded: bool = False) -> dict[tuple[str, str], float]:
        """How long the oldest waiting approval of each (tool, tier) has waited, among the 200 oldest (``uncarded``:
        among those without a card in Slack)."""
        page = await self.store.approvals.list_pending(limit=200)
        ages: dict[tuple[str, str], float] = {}
        for a in page.items:  # oldest first: the first of each (tool, tier) is its oldest
            if (a.tool, str(a.tier)) in ages or (uncarded and await self.store.messages.get(a.id) is not None):
                continue
            ages[(a.tool, str(a.tier))] = max(0.0, now - a.created_at)
        return ages

    async def _settle(self, reading: Reading, now: float) -> None:
        name = reading.rule.name
        found = await self.store.alerts.load(name)
        state: dict[str, Any] = dict(found.data) if found is not None else {"kind": "alert", "status": "ok"}
        episode = int(state.get("episode", 0))
        if reading.firing == (state.get("status") == "firing"):
            return
        if reading.firing:
            episode += 1
        change = "fired" if reading.firing else "resolved"
        claim_key = f"{_CHANGE}:{name}:{episode}:{change}"
        try:
            claim = await self.store.ledger.claim(
                claim_key, action_hash=_CHANGE, holder=self.holder, now=now, lease=60.0, retry_failed=True
            )
        except ClaimRefused:
            return  # another replica is announcing it now
        if not claim.acquired:
            return  # announced already; its state is saved, or will be by the replica that did
        await self._announce(reading, change, episode, now)
        new = {**state, "kind": "alert", "status": "firing" if reading.firing else "ok", "episode": episode}
        new.update(value=reading.value, since=now)
        try:
            await self.store.alerts.save(name, new, expected_version=found.version if found is not None else 0, now=now)
        except StaleVersion:
            pass  # another replica saved the same change
        await self.store.ledger.record_outcome(
            claim_key, holder=self.holder, attempt=claim.attempt, ok=True, result={}, now=now
        )

    async def _announce(self, reading: Reading, change: str, episode: int, now: float) -> None:
        rule = reading.rule
        await self.store.audit.append(
            AuditEntry(
                at=now, actor="hitl:alerts", event=f"alert_{change}", detail=f"{rule.name}: {reading.describe()}"
            )
        )
        data = {
            "alert": {
                "name": rule.name,
                "figure": str(rule.figure),
                "value": reading.value,
                "above": rule.above,
                "below": rule.below,
                "tools": list(rule.tools) if rule.tools else None,
                "tiers": list(rule.tiers) if rule.tiers else None,
                "episode": episode,
                "reason": rule.reason or None,
            }
        }
        if self.events is not None:
            kind = EventKind.ALERT_FIRED if change == "fired" else EventKind.ALERT_RESOLVED
            await self.events.emit(kind, f"alert.{change}:{rule.name}:{episode}", data)
        if self.post is not None:
            icon = ":rotating_light:" if change == "fired" else ":white_check_mark:"
            why = f"\n{rule.reason}" if rule.reason and change == "fired" else ""
            try:
                await self.post(f"{icon} Alert {change}: {rule.name}. {reading.describe()}{why}")
            except Exception:  # Slack away: the audit entry and the webhook stand; say so in the log
                log.exception("could not post alert %s (%s) to Slack", rule.name, change)
