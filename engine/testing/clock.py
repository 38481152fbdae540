"""A clock tests move by hand."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Returns a fixed time until :meth:`advance` or :meth:`set` moves it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        self._now = when
