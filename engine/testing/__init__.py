"""Test helpers shipped with hitl so users can test their own stores and flows.

* :class:`FakeClock`: an injectable clock you move by hand (no sleeping to wait for an expiry).
* :func:`make_approval`: a pending approval with sensible defaults.
* ``hitl.engine.testing.conformance``: the suites every :class:`hitl.engine.ports.Store` backend passes, one per port
  (it imports pytest, so it is a module of its own).
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.testing.factories import make_approval

__all__ = ["FakeClock", "make_approval"]
