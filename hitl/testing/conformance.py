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

from hitl.engine.testing.conformance.adapters import AdapterConformance
from hitl.engine.testing.conformance.agent_world import ADAPTER_CONFIG, AgentHarness
from hitl.engine.testing.conformance.alerts import AlertsConformance
from hitl.engine.testing.conformance.approvals import ApprovalsConformance
from hitl.engine.testing.conformance.delegations import DelegationsConformance
from hitl.engine.testing.conformance.failures import FailureConformance
from hitl.engine.testing.conformance.halts import HaltsConformance
from hitl.engine.testing.conformance.holds import HoldsConformance
from hitl.engine.testing.conformance.jobs import JobsConformance
from hitl.engine.testing.conformance.journal import JournalConformance
from hitl.engine.testing.conformance.ledger import LedgerConformance
from hitl.engine.testing.conformance.receipts import ReceiptsConformance
from hitl.engine.testing.conformance.records import RecordsConformance
from hitl.engine.testing.conformance.retention import RetentionConformance
from hitl.engine.testing.conformance.runs import RunsConformance
from hitl.engine.testing.conformance.tallies import TalliesConformance
from hitl.engine.testing.conformance.trust import TrustConformance
from hitl.engine.testing.conformance.windows import WindowsConformance

__all__ = [
    "ADAPTER_CONFIG",
    "STORE_SUITES",
    "AdapterConformance",
    "AgentHarness",
    "AlertsConformance",
    "ApprovalsConformance",
    "DelegationsConformance",
    "FailureConformance",
    "HaltsConformance",
    "HoldsConformance",
    "JobsConformance",
    "JournalConformance",
    "LedgerConformance",
    "ReceiptsConformance",
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
    HaltsConformance,
    DelegationsConformance,
    ReceiptsConformance,
    HoldsConformance,
    AlertsConformance,
    WindowsConformance,
    TalliesConformance,
    RecordsConformance,
    RetentionConformance,
    FailureConformance,
)
"""Every suite a complete :class:`~hitl.Store` must pass."""
