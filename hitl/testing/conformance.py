"""The conformance suites: one per store port, and one for framework adapters. Every backend and adapter of hitl
passes them; so can yours.

Usage in a pytest module (``store``, ``clock`` and, for :class:`FailureConformance`, ``dead_store`` fixtures come
from you)::

    from hitl.testing.conformance import ApprovalsConformance, LedgerConformance

    class TestMyApprovals(ApprovalsConformance): ...
    class TestMyLedger(LedgerConformance): ...

This module imports pytest; :mod:`hitl.testing` itself does not.
"""

from __future__ import annotations

from hitl.engine.testing.conformance import (
    STORE_SUITES,
    ApprovalsConformance,
    FailureConformance,
    JobsConformance,
    JournalConformance,
    LedgerConformance,
    RecordsConformance,
    RetentionConformance,
    RunsConformance,
    TalliesConformance,
    TrustConformance,
    WindowsConformance,
)
from hitl.engine.testing.conformance.adapters import ADAPTER_CONFIG, AdapterConformance, AgentHarness

__all__ = [
    "ADAPTER_CONFIG",
    "STORE_SUITES",
    "AdapterConformance",
    "AgentHarness",
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
