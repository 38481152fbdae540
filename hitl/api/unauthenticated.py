"""Requests that show no valid token (the API, ``hitl mcp --http``): each is refused with 401 and counted in the
audit trail. Up to a rate per address each is an entry of its own; past it, refusals from that address are counted,
and the next entry it gets says how many there were, so a flood of guesses cannot fill the trail and none goes
unrecorded. (Guessing does not pay: a token is 256 random bits.)"""

from __future__ import annotations

import logging

from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError
from hitl.engine.ports import Clock, Store

from .limits import MAX_KEYS, RateLimiter

__all__ = ["ANONYMOUS", "Unauthenticated"]

log = logging.getLogger(__name__)

ANONYMOUS = "unauthenticated"
"""The actor of the audit entry a request without a valid token makes."""


class Unauthenticated:
    """The audit of requests that name no valid token.

    Args:
        store: where the audit entries go.
        clock: the time they carry.
        rate: entries per second on average per address; ``burst`` at once.
        limiter: the buckets (injectable for tests).
        max_held: addresses whose refusals are held at most; past it, one entry counts them all.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        rate: float = 1.0,
        burst: int = 30,
        limiter: RateLimiter | None = None,
        max_held: int = MAX_KEYS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.rate = rate
        self.burst = burst
        self.limiter = limiter or RateLimiter()
        self.max_held = max_held
        """Addresses whose refusals are held at most (past it, one entry counts them all)."""
        self._held: dict[str, int] = {}

    async def _write_held(self) -> None:
        held, self._held = self._held, {}
        detail = (
            f"{sum(held.values())} requests without valid credentials from {len(held)} addresses, each past its own "
            "rate (a flood from many addresses)"
        )
        if not await self._append(detail):
            self._held = {**held, **self._held}  # counted into later entries

    async def _append(self, detail: str) -> bool:
        """One refusal entry; False (logged) when the store could not take it."""
        entry = AuditEntry(at=self.clock.now(), actor=ANONYMOUS, event="refused", outcome="unauthorized", detail=detail)
        try:
            await self.store.audit.append(entry)
        except EngineError:
            log.warning("could not audit a refused request without valid credentials: %s", detail[:200])
            return False
        return True

    @property
    def holding(self) -> int:
        """Addresses with refusals held now."""
        return len(self._held)

    def held(self, surface: str, address: str) -> int:
        """Refusals from ``address`` counted since its last entry (past the rate), not yet written."""
        return self._held.get(f"{surface} {address}", 0)

    async def refused(self, *, surface: str, address: str, what: str, reason: str = "no valid bearer token") -> None:
        """Record one refused request: an audit entry (with the refusals held since the last one), or, past the
        rate, one more held. A failure to write the entry does not change the answer (401 either way)."""
        key = f"{surface} {address}"
        if self.limiter.take(key, rate=self.rate, burst=self.burst) > 0:
            self._held[key] = self._held.get(key, 0) + 1
            if len(self._held) > self.max_held:  # a flood from many addresses: one entry counts them all, none lost
                await self._write_held()
            return
        held = self._held.pop(key, 0)
        more = f" (and {held} more from this address since its last entry)" if held else ""
        if not await self._append(f"{what} via {surface} from {address}: {reason}{more}"[:500]):
            self._held[key] = self._held.get(key, 0) + held  # counted into the next entry
