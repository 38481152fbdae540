"""Both stores pass every per-port conformance suite (the ``store`` fixture runs each on SQLite and Redis)."""

from __future__ import annotations

from hitl.testing.conformance import (
    STORE_SUITES,
    AlertsConformance,
    ApprovalsConformance,
    DelegationsConformance,
    FailureConformance,
    HaltsConformance,
    HoldsConformance,
    JobsConformance,
    JournalConformance,
    LedgerConformance,
    ReceiptsConformance,
    RecordsConformance,
    RetentionConformance,
    RunsConformance,
    TalliesConformance,
    TrustConformance,
    WindowsConformance,
)


class TestApprovals(ApprovalsConformance):
    pass


class TestAlerts(AlertsConformance):
    pass


class TestLedger(LedgerConformance):
    pass


class TestRuns(RunsConformance):
    pass


class TestJobs(JobsConformance):
    pass


class TestJournal(JournalConformance):
    pass


class TestTrust(TrustConformance):
    pass


class TestHalts(HaltsConformance):
    pass


class TestDelegations(DelegationsConformance):
    pass


class TestReceipts(ReceiptsConformance):
    pass


class TestHolds(HoldsConformance):
    pass


class TestWindows(WindowsConformance):
    pass


class TestTallies(TalliesConformance):
    pass


class TestRecords(RecordsConformance):
    pass


class TestRetention(RetentionConformance):
    pass


class TestFailures(FailureConformance):
    pass


def test_this_module_runs_every_suite() -> None:
    here = {base for cls in globals().values() if isinstance(cls, type) for base in cls.__bases__}
    assert set(STORE_SUITES) <= here
