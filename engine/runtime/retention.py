"""Retention in a long-running process: ``hitl serve`` purges what its retention no longer keeps, once an hour.

Every replica sweeps; the stores make racing purges safe (each record is re-checked where it is removed), so
nothing needs electing. ``hitl purge`` does the same once, for stores no ``hitl serve`` runs against.
"""

from __future__ import annotations

import logging

from hitl.engine.domain.retention import Purged, Retention
from hitl.engine.errors import StoreError
from hitl.engine.ports import Clock, Store

__all__ = ["RetentionSweep", "purge_all"]

log = logging.getLogger(__name__)


async def purge_all(
    store: Store, retention: Retention, *, now: float, actor: str, limit: int = 500, rounds: int = 1000
) -> Purged:
    """Purge until a round removes nothing (at most ``rounds`` rounds of up to ``limit`` records of each kind)."""
    total = Purged()
    for _ in range(rounds):
        done = await store.purger.purge(retention, now=now, actor=actor, limit=limit)
        total += done
        if done.total == 0:
            break
    return total


class RetentionSweep:
    """A :class:`~hitl.engine.runtime.background.Sweeper` that purges every ``every`` seconds of ``clock`` time.

    Args:
        store: the store to purge.
        clock: the time retention counts from.
        retention: the horizons.
        actor: who the purge entries name (``retention:<replica>``).
        every: seconds between purges; the first runs at the first sweep.
        rounds: rounds per purge (of up to 500 records each), so one sweep never holds the loop for long; what is
            left waits for the next.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        retention: Retention,
        *,
        actor: str = "retention",
        every: float = 3600.0,
        rounds: int = 20,
    ) -> None:
        self.store = store
        self.clock = clock
        self.retention = retention
        self.actor = actor
        self.every = every
        self.rounds = rounds
        self._last: float | None = None

    async def sweep(self) -> None:
        now = self.clock.now()
        if self._last is not None and now - self._last < self.every:
            return
        self._last = now
        if self.retention.records is None and self.retention.audit is None:
            return
        try:
            done = await purge_all(self.store, self.retention, now=now, actor=self.actor, rounds=self.rounds)
        except StoreError as exc:  # the next sweep tries again; nothing was half-removed (each step is atomic)
            log.warning("retention could not purge: %s", exc.message)
            return
        if done.total:
            counts = ", ".join(f"{k} {v}" for k, v in done.model_dump().items() if v)
            log.info("retention (%s) removed %s", self.retention.describe(), counts)
