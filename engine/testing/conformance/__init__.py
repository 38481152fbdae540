"""The store conformance suites, one per port. Every backend passes all of them; so can yours.

Usage in a pytest module (``store``, ``clock`` and, for :class:`FailureConformance`, ``dead_store``
fixtures come from you)::

    from engine.testing.conformance import ApprovalsConformance, LedgerConformance

    class TestMyApprovals(ApprovalsConformance): ...
    class TestMyLedger(LedgerConformance): ...

This package imports pytest; ``engine.testing`` itself does not.
"""

from __future__ import annotations

from engine.testing.conformance.approvals import ApprovalsConformance
from engine.testing.conformance.failures import FailureConformance
from engine.testing.conformance.jobs import JobsConformance
from engine.testing.conformance.journal import JournalConformance
from engine.testing.conformance.ledger import LedgerConformance
from engine.testing.conformance.records import RecordsConformance
from engine.testing.conformance.retention import RetentionConformance
from engine.testing.conformance.runs import RunsConformance
from engine.testing.conformance.tallies import TalliesConformance
from engine.testing.conformance.trust import TrustConformance
from engine.testing.conformance.windows import WindowsConformance

__all__ = [
    "STORE_SUITES",
    "ApprovalsConformance",
    "FailureConformance",
    "JobsConformance",
    "JournalConformance",
    "LedgerConformance",
    "RecordsConformance",
    "RetentionConformance",
    "RunsConformance",
    "TalliesConformance",
    "TrustConformance",
    "WindowsConformance",
]

STORE_SUITES: tuple[type, ...] = (
    ApprovalsConformance,
    LedgerConformance,
    RunsConformance,
    JournalConformance,
    JobsConformance,
    TrustConformance,
    WindowsConformance,
    TalliesConformance,
    RecordsConformance,
    RetentionConformance,
    FailureConformance,
)
"""Every suite a complete :class:`engine.ports.Store` must pass."""
