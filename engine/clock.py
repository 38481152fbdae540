"""The real clock. Tests use :class:`engine.testing.FakeClock`."""

from __future__ import annotations

import time

__all__ = ["SystemClock"]


class SystemClock:
    """Wall-clock time in epoch seconds."""

    def now(self) -> float:
        return time.time()
