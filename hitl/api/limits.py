"""Per-token rate limits: a token bucket each, so a runaway client gets 429 with ``Retry-After`` and everyone else
is served."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


MAX_KEYS = 10_000
"""Buckets kept at most. Keys are tokens and, before authentication, client addresses: anyone can make more."""


class RateLimiter:
    """``rate`` requests per second on average per key, bursts up to ``burst``.

    At most ``max_keys`` buckets are kept. Past that, the buckets that have refilled are dropped (a full bucket
    is the same as none), then the longest unused ones: an address that made no request for the longest time
    starts again with a full burst.

    Args:
        now: a monotonic clock in seconds (injectable for tests).
        max_keys: buckets kept at most.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic, *, max_keys: int = MAX_KEYS) -> None:
        self.now = now
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float, float]] = {}  # key -> tokens, when, when it is full again

    def take(self, key: str, *, rate: float, burst: int) -> float:
        """0 when the request may go ahead (one token spent), else the seconds until one is available."""
        now = self.now()
        tokens, then, _ = self._buckets.pop(key, (float(burst), now, now))  # re-inserted last: the newest
        tokens = min(float(burst), tokens + (now - then) * rate)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / rate
        if wait == 0.0:
            tokens -= 1.0
        self._buckets[key] = (tokens, now, now + (burst - tokens) / rate)
        if len(self._buckets) > self.max_keys:
            self._trim(now)
        return wait

    @property
    def size(self) -> int:
        """Buckets kept now."""
        return len(self._buckets)

    def _trim(self, now: float) -> None:
        for key in [k for k, (_, _, full) in self._buckets.items() if full <= now]:
            del self._buckets[key]
        while len(self._buckets) > self.max_keys:  # all still in use: the longest unused go first
            del self._buckets[next(iter(self._buckets))]

    @staticmethod
    def retry_after(wait: float) -> str:
        return str(max(1, math.ceil(wait)))
