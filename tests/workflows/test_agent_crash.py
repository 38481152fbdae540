"""kill -9 inside an agent step: after the reviewer's approval the agent's tool runs, and its process dies before
the outcome is recorded. A new process takes the run over; the replayed agent does not ask its model again or
call the tool blindly: the effect is in doubt and a person says whether it happened."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.workflows.conftest import RESEARCH, Desk, Hitl

CRASHING_DESK = '''
"""The research desk, whose publish_report kills its own process right after the effect (once)."""
import os
import signal
from pathlib import Path

from research_desk import effects, log_path, publish_report as _publish


def publish_report(title: str, body: str, *, idempotency_key: str) -> dict:
    out = _publish(title, body, idempotency_key=idempotency_key)
    marker = Path(str(log_path()) + ".crashed")
    if not marker.exists():
        marker.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)  # dies after the effect, before hitl records it
    return out
'''

FLOW = {
    "name": "crash-in-agent",
    "runtime": {"provider": "scripted", "script": "script.yaml"},
    "tools": {"publish_report": {"function": "crashing:publish_report"}},  # not idempotent, no reconcile hook
    "agents": {"writer": {"prompt": "Publish.", "tools": ["publish_report"]}},
    "steps": [{"id": "report", "agent": "writer", "input": "Publish the report"}],
}
SCRIPT = {
    "writer": [
        {
            "turns": [
                {"say": "Publishing.", "call": "publish_report", "args": {"title": "T", "body": "B"}},
                {"say": "Published."},
            ]
        }
    ]
}


def test_kill_9_after_an_agent_tool_ran_asks_a_person_and_never_repeats_it(
    hitl: Hitl, desk: Desk, tmp_path: Path
) -> None:
    shutil.copy(RESEARCH / "desk.py", tmp_path / "research_desk.py")
    (tmp_path / "crashing.py").write_text(CRASHING_DESK)
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    flow = tmp_path / "flow.yaml"
    flow.write_text(yaml.safe_dump(FLOW))
    now = 1_900_000_000
    first = hitl(
        "run", str(flow), env={"HITL_NOW": str(now)}, expect=4
    )  # crashing.py imports research_desk from the cwd
    assert first.tool == "publish_report"
    killed = hitl("resume", first.approval_id, "--approve", "--as", "U_EDITOR1", env={"HITL_NOW": str(now)}, expect=-9)
    assert killed.out == {} and desk.tools() == ["publish_report"]  # it happened; hitl never heard
    # A minute later (the dead worker's leases have run out) another process takes the run over.
    doubt = hitl("resume", str(first.out["session_id"]), env={"HITL_NOW": str(now + 60)}, expect=4)
    assert doubt.tool == "doubt:publish_report" and desk.tools() == ["publish_report"]  # not run again blindly
    done = hitl(
        "resume",
        doubt.approval_id,
        "--feedback",
        "it is on the wiki",
        "--as",
        "U_EDITOR1",
        env={"HITL_NOW": str(now + 70)},
        expect=0,
    )
    assert done.out["outputs"]["report"] == "Published."  # the agent went on from the replayed turn
    assert desk.tools() == ["publish_report"]
    desk.assert_nothing_twice()
