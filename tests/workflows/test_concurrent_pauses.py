"""Two steps paused at once, on both stores: a queued resume (what `hitl serve` does after a Slack click) and
recovery both act on a decision of either approval, not only the one the run names first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunState, RunStatus
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.workflows.conftest import RESEARCH, Desk
from tests.workflows.test_validate_and_sessions import SCRIPT, TWO_EMAILS


async def _state(rt: Runtime, session: str) -> RunState:
    found = await rt.store.runs.load(session)
    assert found is not None
    return RunState.of(found)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_either_decision_resumes_a_run_with_two_waiting_steps(
    backend: str, tmp_path: Path, desk: Desk, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_EFFECTS", str(desk.path))
    shutil.copy(RESEARCH / "desk.py", tmp_path / "desk.py")
    shutil.copy(RESEARCH / "hitl.yaml", tmp_path / "hitl.yaml")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(TWO_EMAILS))
    url = fresh_store_url(backend, request, tmp_path, tag="w")
    clock = FakeClock()
    rt = Runtime.build(store=open_store(url), clock=clock, config_path=str(tmp_path / "hitl.yaml"))
    try:
        first = await rt.lifecycle.start(load_workflow(tmp_path / "two.yaml"), {})
        assert first.status is RunStatus.PAUSED and first.approval is not None
        session = first.session_id
        state = await _state(rt, session)
        assert sorted(state.waits) == ["workers-1", "workers-2"] and state.waiting == first.approval.id
        other = next(a for a in state.waits.values() if a != first.approval.id)
        await rt.lifecycle.decide(DecideRequest(other, "U_EDITOR1", DecisionKind.APPROVE), resume="queue")
        assert await rt.lifecycle.process_jobs() == 1
        state = await _state(rt, session)
        assert state.status is RunStatus.PAUSED and list(state.waits.values()) == [first.approval.id]
        assert desk.tools() == ["send_email"]
        # The last decision through the service alone (a process that dies right after the store's step): the
        # resume was queued in that step.
        await rt.contexts.default.service.decide(DecideRequest(first.approval.id, "U_EDITOR1", DecisionKind.APPROVE))
        assert await rt.lifecycle.recover() == 0
        assert await rt.lifecycle.process_jobs() == 1
        state = await _state(rt, session)
        assert state.status is RunStatus.COMPLETED and state.waits == {} and state.waiting is None
        assert desk.tools() == ["send_email", "send_email"]
        desk.assert_nothing_twice()
    finally:
        await rt.close()
