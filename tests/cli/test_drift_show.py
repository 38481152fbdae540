"""``hitl show`` of an approval asked again because its consequence drifted: hitl's notice, then what was approved,
then what will happen now, each apart from hitl's lines; ``--json`` carries the drift with what was seen and its
digest. The drift comes from the SQL example's workflow run (an account signs in between approval and execution)."""

from __future__ import annotations

import asyncio
import importlib
import os
import sqlite3
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.cli.conftest import Cli

EXAMPLE = Path(__file__).parents[2] / "examples" / "sql"


async def _drifted(store_url: str) -> tuple[str, str]:
    store = open_store(store_url)
    try:
        svc = ApprovalService.from_config(load_config(EXAMPLE / "hitl.yaml"), store=store, clock=FakeClock())
        runner = Runner(svc)
        r = await runner.start(load_workflow(EXAMPLE / "workflow.yaml"), {"before": "2026-01-01"})
        assert r.approval is not None
        with sqlite3.connect(os.environ["ACCOUNTS_DB"]) as db:  # A-1 signs in after the admins saw two rows
            db.execute("UPDATE accounts SET last_login = '2026-11-28' WHERE id = 'A-1'")
        await svc.decide(DecideRequest(r.approval.id, "U_ADMIN1", DecisionKind.APPROVE), resume=False)
        again = await runner.resume(r.session_id)
        assert again.approval is not None
        return r.approval.id, again.approval.id
    finally:
        await store.close()


def test_hitl_show_prints_what_was_approved_and_what_will_happen_now(
    cli: Cli, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCOUNTS_DB", str(tmp_path / "accounts.db"))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    importlib.import_module("dormant_accounts").connect().close()  # the accounts, made with their samples
    first, again = asyncio.run(_drifted(env["HITL_STORE"]))
    shown = cli("show", again, HITL_CONFIG=str(EXAMPLE / "hitl.yaml"), ACCOUNTS_DB=str(tmp_path / "accounts.db"))
    assert shown.code == 0, shown.err
    lines = [" ".join(line.split()) for line in shown.out.splitlines()]  # the label column's width aside
    notice = next(line for line in lines if line.startswith("drifted"))
    assert f"changed after {first} was approved (drift 1 of 3); nothing ran" in notice
    seen = lines.index("what was approved (computed by the tool's own code from these arguments; shown as text)")
    now = lines.index("what will happen (computed by the tool's own code from these arguments; shown as text)")
    assert lines[seen + 1 : seen + 4] == [
        "Closes 2 active accounts last seen before 2026-01-01",
        'account: "A-1"',
        'account: "A-3"',
    ]
    assert lines[now + 1 : now + 3] == ["Closes 1 active account last seen before 2026-01-01", 'account: "A-3"']
    as_json = cli("show", again, "--json", HITL_CONFIG=str(EXAMPLE / "hitl.yaml")).json()
    assert as_json["drift"]["of"] == first and as_json["drift"]["count"] == 1
    assert as_json["view"]["drift"]["seen_sha256"] == as_json["drift"]["seen"]["sha256"]
