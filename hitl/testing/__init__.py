"""Test helpers for users of hitl: test your own flows, adapters and stores the way hitl tests its own.

* :class:`FakeClock`: an injectable clock you move by hand (no sleeping to wait for an expiry).
* :func:`make_approval`: a pending approval with sensible defaults.
* :mod:`hitl.testing.conformance`: the suites every store passes, one per port, and the one every framework
  adapter passes (it imports pytest, so it is a module of its own).
"""

from __future__ import annotations

from hitl.engine.clocks import FakeClock
from hitl.engine.testing.factories import make_approval

__all__ = ["FakeClock", "make_approval"]
