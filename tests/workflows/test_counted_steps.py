"""Every workflow step that runs without a person is counted: a velocity rule on an allowed tool lets exactly as many
runs execute it as it allows, on every store, each run a fresh `hitl run` process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.backends import BACKENDS, fresh_store_url
from tests.workflows.conftest import RESEARCH, Desk, Hitl

CONFIG = """\
requester: agent:research-desk
roles:
  editors: [U_EDITOR1, U_EDITOR2]
policy:
  allowed_tools: [search]
  rules:
    - name: search_burst
      tools: [search]
      velocity: {subject: args.query, max: 3, window: 1h}
      tier: approve
      role: editors
"""
"""Searching is free, three times an hour per query."""

FLOW = """\
name: counted
vars: {topic: solid-state batteries}
tools:
  search: {function: desk:search}
steps:
  - {id: look, tool: search, args: {query: "{{ vars.topic }}"}}
"""


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store every `hitl` process of the test shares (the workflows' own fixture, on every backend)."""
    return fresh_store_url(request.param, request, tmp_path, tag="wc")


@pytest.mark.slow
def test_a_velocity_limit_lets_three_runs_execute_the_step_and_pauses_the_fourth(
    hitl: Hitl, desk: Desk, tmp_path: Path
) -> None:
    """Four runs of a workflow whose tool step is allowed, limited to 3 an hour: 3 execute it, the 4th pauses for a
    person (exit 4); rejected, it stops (exit 3) without running the step."""
    shutil.copy(RESEARCH / "desk.py", tmp_path / "desk.py")
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    (tmp_path / "flow.yaml").write_text(FLOW)
    env = {"HITL_CONFIG": str(tmp_path / "hitl.yaml")}
    done = [hitl("run", str(tmp_path / "flow.yaml"), expect=0, env=env) for _ in range(3)]
    assert [r.status for r in done] == ["completed"] * 3 and len({r.out["session_id"] for r in done}) == 3
    assert desk.tools() == ["search"] * 3
    fourth = hitl("run", str(tmp_path / "flow.yaml"), expect=4, env=env)
    assert fourth.status == "paused"
    asked = fourth.out["approval"]
    assert (asked["tool"], asked["args"], asked["rule"]) == (
        "search",
        {"query": "solid-state batteries"},
        "search_burst",
    )
    assert desk.tools() == ["search"] * 3
    rejected = hitl(
        "resume", fourth.approval_id, "--reject", "--reason", "enough searching", "--as", "U_EDITOR1", env=env
    )
    assert (rejected.code, rejected.status) == (3, "rejected")
    assert desk.tools() == ["search"] * 3
    desk.assert_nothing_twice()
