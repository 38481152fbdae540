"""Clocks: the wall clock a process runs on, and the clock tests and rehearsals move by hand.

Every rule that depends on time (expiry, off-hours, velocity, leases) takes its time from a clock it is given,
so a test never sleeps to wait for an expiry: it moves a :class:`FakeClock`.
"""

from __future__ import annotations

import time

__all__ = ["FakeClock", "SystemClock"]


class SystemClock:
    """Wall-clock time in epoch seconds."""

    def now(self) -> float:
        """The current time, in epoch seconds."""
        return time.time()


class FakeClock:
    """Returns a fixed time until :meth:`advance` or :meth:`set` moves it (``HITL_NOW`` freezes one too)."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        """The time the clock stands at."""
        return self._now

    def advance(self, seconds: float) -> float:
        """Move the clock forward by ``seconds``; returns the new time."""
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        """Put the clock at ``when`` (epoch seconds)."""
        self._now = when
