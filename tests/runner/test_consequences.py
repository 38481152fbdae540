"""A workflow run's tool step asks with its tool's consequence: computed when the run pauses on a new approval (not
again when it resumes), stored with the approval the pause records."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.consequence_tools as tools
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.consequences import ConsequenceOutcome
from hitl.engine.domain.runs import RunStatus
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock

EXAMPLE = Path(__file__).parents[2] / "examples" / "refund"
OURS = '      consequence: "shop_consequences:refund"\n'


async def test_a_paused_run_asks_with_the_consequence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    text = (EXAMPLE / "hitl.yaml").read_text()
    assert OURS in text  # the example's own, swapped for one that counts its runs
    config = parse_config(text.replace(OURS, '      consequence: "tests.consequence_tools:refund"\n'))
    store = SqliteStore(tmp_path / "s.db")
    try:
        svc = ApprovalService.from_config(config, store=store, clock=FakeClock())
        runner = Runner(svc)
        tools.RAN.clear()
        r = await runner.start(load_workflow(EXAMPLE / "workflow.yaml"), {"order_id": "78291", "amount": "120"})
        assert r.status is RunStatus.PAUSED and r.approval is not None
        stored = await store.approvals.get(r.approval.id)
        assert stored.consequence is not None and stored.consequence.outcome is ConsequenceOutcome.SHOWN
        assert stored.consequence.summary == "Order 78291 keeps 80.00 refundable"
        again = await runner.resume(r.session_id)  # still pending: asked once, computed once
        assert again.status is RunStatus.PAUSED and len(tools.RAN) == 1
    finally:
        await store.close()
