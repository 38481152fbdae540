"""Conformance case 8 with real processes: the agent process is killed with SIGKILL while its run waits for a
person, a reviewer decides meanwhile, a new process takes the session over and the tool runs exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.agent_world import ADAPTER_CONFIG, Ledger
from tests.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("harness", ["strands-inline", "strands-interrupt", "openai-agents", "pydantic-ai"])
async def test_killed_while_waiting_then_decided_then_taken_over_runs_once(harness: str, tmp_path: Path) -> None:
    def agent(mode: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.adapters.agent_process", harness, mode, str(tmp_path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OTEL_SDK_DISABLED": "true"},
        )

    first = agent("start")
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "waiting", first.stderr
    finally:
        first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)  # reaps it and closes its pipes
    assert first.returncode == -signal.SIGKILL

    store = SqliteStore(tmp_path / "hitl.db")
    (a,) = (await store.approvals.list_pending()).items
    svc = ApprovalService.from_config(parse_config(ADAPTER_CONFIG), store=store, clock=SystemClock())
    await svc.decide(DecideRequest(a.id, "U_S1", DecisionKind.APPROVE))

    second = agent("finish")
    try:
        out, err = second.communicate(timeout=120)
    finally:  # never leaked, whatever failed
        stop_process(second)
    assert second.returncode == 0, err
    results = json.loads(out.strip().splitlines()[-1])
    assert "DENIED" not in results["c1"]
    assert Ledger(tmp_path / "effects.db").rows() == [("refund", "K1", 45.0)]
    assert (await store.approvals.get(a.id)).status is Status.EXECUTED
    await store.close()
