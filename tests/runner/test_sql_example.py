"""The SQL example (``examples/sql``): its consequence counts the rows the tool's very ``UPDATE`` touches, inside a
transaction that is rolled back on a connection that cannot commit (nothing changes, and a commit is refused); an
account signing in between approval and execution is caught as drift (nothing runs, asked again with both counts);
the run then closes exactly the rows its approvers saw last. Through a workflow run on SQLite."""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunResult, RunStatus
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock

EXAMPLE = Path(__file__).parents[2] / "examples" / "sql"


@pytest.fixture
def accounts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("ACCOUNTS_DB", str(tmp_path / "accounts.db"))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    module = importlib.import_module("dormant_accounts")
    module.connect().close()
    return module


def states(accounts: ModuleType) -> dict[str, str]:
    with sqlite3.connect(accounts.db_path()) as db:
        return dict(db.execute("SELECT id, status FROM accounts"))


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    """The example's runner, on an approval service of its ``hitl.yaml`` over a SQLite store of its own."""
    store = SqliteStore(tmp_path / "s.db")
    try:
        yield Runner(ApprovalService.from_config(load_config(EXAMPLE / "hitl.yaml"), store=store, clock=FakeClock()))
    finally:
        await store.close()


async def _closing_dormant(runner: Runner) -> RunResult:
    """The example's workflow started to close the accounts last seen before 2026: paused at its approval."""
    return await runner.start(load_workflow(EXAMPLE / "workflow.yaml"), {"before": "2026-01-01"})


def test_the_consequence_counts_the_update_and_cannot_commit(accounts: ModuleType) -> None:
    before = states(accounts)
    got = accounts.close_dormant_consequence({"before": "2026-01-01"})
    assert got == {
        "summary": "Closes 2 active accounts last seen before 2026-01-01",
        "table": [{"account": "A-1"}, {"account": "A-3"}],
    }
    assert states(accounts) == before and accounts.count_read_only("2026-01-01") == 2
    db = accounts.cannot_commit()
    try:
        db.execute("BEGIN")
        db.execute(accounts.CLOSE, ("k", "2027-01-01"))
        for statement in (
            "COMMIT",
            "INSERT INTO accounts (id) VALUES ('X')",
            "DELETE FROM accounts",
            "PRAGMA query_only = 0",
        ):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
                db.execute(statement)
        db.execute("ROLLBACK")
    finally:
        db.close()
    assert states(accounts) == before


async def test_a_sign_in_between_approval_and_execution_is_caught_as_drift(
    runner: Runner, accounts: ModuleType
) -> None:
    svc = runner.svc
    r = await _closing_dormant(runner)
    assert r.status is RunStatus.PAUSED and r.approval is not None and r.approval.consequence is not None
    assert r.approval.consequence.summary == "Closes 2 active accounts last seen before 2026-01-01"
    with sqlite3.connect(accounts.db_path()) as db:  # A-1 signs in after the admins saw two rows
        db.execute("UPDATE accounts SET last_login = '2026-11-28' WHERE id = 'A-1'")
    await svc.decide(DecideRequest(r.approval.id, "U_ADMIN1", DecisionKind.APPROVE), resume=False)
    again = await runner.resume(r.session_id)
    assert again.status is RunStatus.PAUSED and again.approval is not None and again.approval.drift is not None
    assert again.approval.drift.seen == r.approval.consequence
    assert again.approval.consequence is not None and again.approval.consequence.table == ({"account": "A-3"},)
    assert set(states(accounts).values()) == {"active"}  # nothing ran
    await svc.decide(DecideRequest(again.approval.id, "U_ADMIN2", DecisionKind.APPROVE), resume=False)
    assert (await runner.resume(r.session_id)).status is RunStatus.COMPLETED
    assert states(accounts) == {"A-1": "active", "A-2": "active", "A-3": "closed", "A-4": "active"}


async def test_a_check_that_cannot_count_runs_nothing_and_the_next_resume_checks_again(
    runner: Runner, accounts: ModuleType
) -> None:
    svc, store = runner.svc, runner.store
    r = await _closing_dormant(runner)
    assert r.approval is not None
    await svc.decide(DecideRequest(r.approval.id, "U_ADMIN1", DecisionKind.APPROVE), resume=False)
    holder = sqlite3.connect(accounts.db_path(), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock: the consequence cannot take it (1 s)
    try:
        with pytest.raises(EngineError) as refused:
            await runner.resume(r.session_id)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert refused.value.code is ErrorCode.CONSEQUENCE_UNCHECKED and refused.value.code.retryable
    assert set(states(accounts).values()) == {"active"}  # nothing ran
    assert (await store.approvals.get(r.approval.id)).status is Status.APPROVED
    assert (await runner.resume(r.session_id)).status is RunStatus.COMPLETED  # checked again: unchanged
    assert states(accounts) == {"A-1": "closed", "A-2": "active", "A-3": "closed", "A-4": "active"}
