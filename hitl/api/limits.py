"""Per-token rate limits: a token bucket each, so a runaway client gets 429 with ``Retry-After`` and everyone else
is served."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """``rate`` requests per second on average per key, bursts up to ``burst``.

    Args:
        now: a monotonic clock in seconds (injectable for tests).
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, *, rate: float, burst: int) -> float:
        """0 when the request may go ahead (one token spent), else the seconds until one is available."""
        now = self.now()
        tokens, then = self._buckets.get(key, (float(burst), now))
        tokens = min(float(burst), tokens + (now - then) * rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / rate

    @staticmethod
    def retry_after(wait: float) -> str:
        return str(max(1, math.ceil(wait)))
