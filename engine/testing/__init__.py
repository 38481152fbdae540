"""Test helpers shipped with hitl so users can test their own stores and flows.

* :class:`FakeClock`: an injectable clock you move by hand (no sleeping to wait for an expiry).
* :class:`StoreConformance`: the suite every :class:`engine.ports.Store` backend must pass. Subclass it
  in a pytest module and provide ``store`` and ``clock`` fixtures.
"""

from __future__ import annotations

from engine.testing.clock import FakeClock
from engine.testing.factories import make_approval

__all__ = ["FakeClock", "StoreConformance", "make_approval"]


def __getattr__(name: str) -> object:
    # The suite imports pytest; load it only when asked for, so `engine.testing.FakeClock` needs no pytest.
    if name == "StoreConformance":
        from engine.testing.conformance import StoreConformance

        return StoreConformance
    raise AttributeError(name)
