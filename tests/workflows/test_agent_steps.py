"""Agent steps fail closed: a tool the policy denies, arguments its schema refuses, an answer its output schema
refuses, a router naming no route, an orchestrator fanning out too far, a graph going round: nothing runs that
should not, and the run says why."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.workflows.conftest import RESEARCH, Desk

POLICY = """\
requester: agent:desk
roles: {editors: [U_EDITOR1]}
policy:
  allowed_tools: [search, save_note]
  denied_tools: [send_email]
  tools:
    publish_report: {tier: approve, role: editors}
"""
TOOLS = {
    "search": {"function": "desk:search", "idempotent": True},
    "send_email": {"function": "desk:send_email"},
    "publish_report": {
        "function": "desk:publish_report",
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string", "maxLength": 20}, "body": {"type": "string"}},
            "required": ["title", "body"],
            "additionalProperties": False,
        },
    },
}


class Desk2:
    def __init__(self, tmp: Path, rt: Runtime) -> None:
        self.tmp, self.rt = tmp, rt

    async def run(self, flow: dict[str, Any], script: dict[str, Any], **given: Any) -> Any:
        (self.tmp / "script.yaml").write_text(yaml.safe_dump(script))
        path = self.tmp / f"{flow['name']}.yaml"
        path.write_text(yaml.safe_dump({"runtime": {"provider": "scripted", "script": "script.yaml"}, **flow}))
        return await self.rt.lifecycle.start(load_workflow(path), given, session_id=f"ses_{flow['name']}")


@pytest.fixture
async def desk2(tmp_path: Path, desk: Desk, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Desk2]:
    monkeypatch.setenv("HITL_EFFECTS", str(desk.path))
    shutil.copy(RESEARCH / "desk.py", tmp_path / "desk.py")
    (tmp_path / "hitl.yaml").write_text(POLICY)
    rt = Runtime.build(
        store=open_store(f"sqlite:///{tmp_path}/a.db"), clock=FakeClock(), config_path=str(tmp_path / "hitl.yaml")
    )
    try:
        yield Desk2(tmp_path, rt)
    finally:
        await rt.close()


def agent_flow(name: str, tools: list[str], **agent: Any) -> dict[str, Any]:
    return {
        "name": name,
        "tools": {t: TOOLS[t] for t in tools},
        "agents": {"a": {"prompt": "Work.", "tools": tools, **agent}},
        "steps": [{"id": "s", "agent": "a", "input": "Go"}],
    }


def turns(*items: dict[str, Any]) -> dict[str, Any]:
    return {"a": [{"turns": list(items)}]}


async def test_a_denied_tool_and_refused_arguments_never_run_and_the_agent_is_told(desk2: Desk2, desk: Desk) -> None:
    script = turns(
        {"say": "Mail them.", "call": "send_email", "args": {"to": "x@example.com", "subject": "s", "body": "b"}},
        {
            "say": "Publish.",
            "call": "publish_report",
            "args": {"title": "far too long a title for the wiki", "body": "b"},
        },
        {"say": "Could not do either."},
    )
    result = await desk2.run(agent_flow("refused", ["send_email", "publish_report"]), script)
    assert result.status is RunStatus.COMPLETED and result.outputs["s"] == "Could not do either."
    assert desk.calls() == []  # neither ran; no approval was even asked for the refused arguments
    assert (await desk2.rt.store.approvals.list_pending(limit=10)).items == []


async def test_an_answer_its_output_schema_refuses_fails_the_step(desk2: Desk2) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    result = await _failed(desk2, agent_flow("schema", [], output_schema=schema), turns({"say": '{"grade": 3}'}))
    assert "output_schema refuses" in result


async def test_a_script_that_runs_out_and_too_many_turns_fail_the_step(desk2: Desk2) -> None:
    short = turns({"say": "Searching.", "call": "search", "args": {"query": "q"}})
    # hitl's own errors come through the framework as they were raised (not wrapped in Strands' exceptions)
    assert (await _failed(desk2, agent_flow("short", ["search"]), short)).startswith(
        "the model script for agent a has 1 turns"
    )
    looping = turns(*[{"say": "Again.", "call": "search", "args": {"query": f"q{i}"}} for i in range(5)])
    assert (await _failed(desk2, agent_flow("loop", ["search"], max_turns=2), looping)).startswith(
        "agent a took 2 model turns"
    )


async def test_a_router_naming_no_route_fails_and_nothing_after_it_runs(desk2: Desk2, desk: Desk) -> None:
    flow = {
        "name": "route",
        "tools": {"search": TOOLS["search"]},
        "agents": {"a": {"prompt": "Route.", "tools": ["search"]}},
        "pattern": {
            "type": "routing",
            "router": {"agent": "a", "input": "Which?"},
            "routes": {
                "quick": {"steps": [{"id": "q", "tool": "search", "args": {"query": "q"}}]},
                "deep": {"steps": [{"id": "d", "tool": "search", "args": {"query": "d"}}]},
            },
        },
    }
    result = await desk2.run(flow, turns({"say": "Either quick or deep, I cannot say."}))
    assert result.status is RunStatus.FAILED and "no route fits" in str(result.reason) and desk.calls() == []


async def test_an_orchestrator_fanning_out_too_far_fails_before_any_worker(desk2: Desk2, desk: Desk) -> None:
    flow = {
        "name": "fan",
        "agents": {"a": {"prompt": "Plan."}},
        "pattern": {
            "type": "orchestrator_workers",
            "orchestrator": {"agent": "a", "input": "Plan"},
            "workers": {"agent": "a", "input": "{{ task }}", "max_tasks": 2},
        },
    }
    result = await desk2.run(flow, turns({"say": '["a", "b", "c"]'}))
    assert result.status is RunStatus.FAILED and "allows 2" in str(result.reason)


async def test_a_graph_going_round_stops_at_max_visits(desk2: Desk2, desk: Desk) -> None:
    flow = {
        "name": "round",
        "tools": {"search": TOOLS["search"]},
        "pattern": {
            "type": "graph",
            "max_visits": 2,
            "nodes": [{"id": "look", "tool": "search", "args": {"query": "again"}}],
            "edges": {"look": [{"to": "look"}]},
        },
    }
    result = await desk2.run(flow, {})
    assert result.status is RunStatus.FAILED and "reached 2 times" in str(result.reason)
    assert len(desk.calls()) == 2  # one effect per visit, each under its own key
    desk.assert_nothing_twice()


def test_credentials_in_a_workflow_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "keys",
                "runtime": {"provider": "openai", "model_id": "m", "params": {"client_args": {"api_key": "sk-x"}}},
                "agents": {"a": {"prompt": "p"}},
                "steps": [{"id": "s", "agent": "a", "input": "i"}],
            }
        )
    )
    with pytest.raises(EngineError) as caught:
        load_workflow(path)
    assert caught.value.code is ErrorCode.WORKFLOW_INVALID and "from the environment only" in caught.value.message


async def _failed(desk2: Desk2, flow: dict[str, Any], script: dict[str, Any]) -> str:
    """The step's error, after checking that the run is recorded as failed with it (so `hitl resume` retries)."""
    with pytest.raises(EngineError) as caught:
        await desk2.run(flow, script)
    assert caught.value.code is ErrorCode.AGENT_FAILED
    found = await desk2.rt.store.runs.load(f"ses_{flow['name']}")
    assert found is not None and found.data["status"] == "failed" and found.data["reason"] == caught.value.message
    return caught.value.message


async def test_batches_conditional_gates_and_required_approval_work_inside_parallel_branches(
    desk2: Desk2, desk: Desk
) -> None:
    flow = {
        "name": "gates",
        "vars": {"recipients": ["a@example.com", "b@example.com"], "strict": "no"},
        "tools": {"search": TOOLS["search"], "send_email": {"function": "desk:send_email"}},
        "pattern": {
            "type": "parallel",
            "branches": [
                {
                    "id": "mail",
                    "steps": [
                        {
                            "id": "mail_all",
                            "tool": "send_email",
                            "for_each": "vars.recipients",
                            "as": "to",
                            "args": {"to": "{{ to }}", "subject": "s", "body": "b"},
                        }
                    ],
                },
                {
                    "id": "look",
                    "steps": [
                        {"id": "maybe", "type": "gate", "prompt": "Strict?", "condition": "vars.strict == 'yes'"},
                        {"id": "lookup", "tool": "search", "args": {"query": "q"}, "approval": "required"},
                    ],
                },
            ],
        },
    }
    policy = POLICY.replace("denied_tools: [send_email]", "denied_tools: []").replace(
        "publish_report: {tier: approve, role: editors}", "send_email: {tier: approve, role: editors}"
    )
    (desk2.tmp / "hitl.yaml").write_text(policy)
    desk2.rt = Runtime.build(store=desk2.rt.store, clock=FakeClock(), config_path=str(desk2.tmp / "hitl.yaml"))
    paused = await desk2.run(flow, {})
    assert paused.status is RunStatus.PAUSED and paused.outputs["maybe"] == {"skipped": True}
    found = await desk2.rt.store.runs.load("ses_gates")
    assert found is not None
    waits = found.data["waits"]
    assert sorted(waits) == ["lookup", "mail_all"]  # the batch and the required search, both asked at once
    batch = await desk2.rt.store.approvals.get(waits["mail_all"])
    assert [item["to"] for item in batch.args["items"]] == ["a@example.com", "b@example.com"]  # bound to both
    for approval_id in waits.values():
        await desk2.rt.lifecycle.decide(DecideRequest(approval_id, "U_EDITOR1", DecisionKind.APPROVE), resume="none")
    done = await desk2.rt.lifecycle.resume("ses_gates")
    assert done.status is RunStatus.COMPLETED
    assert sorted(desk.tools()) == ["search", "send_email", "send_email"]
    desk.assert_nothing_twice()


async def test_a_run_that_ends_cancels_what_its_other_branches_wait_on(desk2: Desk2, desk: Desk) -> None:
    flow = {
        "name": "ended",
        "tools": {"send_email": {"function": "desk:send_email"}},
        "pattern": {
            "type": "parallel",
            "branches": [
                {"id": "ask", "steps": [{"id": "check", "type": "gate", "prompt": "Go on?"}]},
                {
                    "id": "mailing",
                    "steps": [
                        {
                            "id": "mail",
                            "tool": "send_email",
                            "args": {"to": "a@example.com", "subject": "s", "body": "b"},
                        }
                    ],
                },
            ],
        },
    }
    policy = (
        POLICY.replace("denied_tools: [send_email]", "denied_tools: []").replace(
            "publish_report: {tier: approve, role: editors}", "send_email: {tier: approve, role: editors}"
        )
        + "    gate:check: {tier: approve, role: editors}\n"
    )
    (desk2.tmp / "hitl.yaml").write_text(policy)
    desk2.rt = Runtime.build(store=desk2.rt.store, clock=FakeClock(), config_path=str(desk2.tmp / "hitl.yaml"))
    paused = await desk2.run(flow, {})
    found = await desk2.rt.store.runs.load("ses_ended")
    assert found is not None and sorted(found.data["waits"]) == ["check", "mail"]
    gate, mail = found.data["waits"]["check"], found.data["waits"]["mail"]
    assert paused.status is RunStatus.PAUSED
    await desk2.rt.lifecycle.decide(DecideRequest(gate, "U_EDITOR1", DecisionKind.REJECT, reason="stop"), resume="none")
    ended = await desk2.rt.lifecycle.resume("ses_ended")
    assert ended.status is RunStatus.REJECTED and desk.calls() == []
    left = await desk2.rt.store.approvals.get(mail)
    assert left.status.value == "cancelled" and "the run ended (rejected)" in str(left.reason)
    found = await desk2.rt.store.runs.load("ses_ended")
    assert found is not None and found.data["waits"] == {}
    trail = await desk2.rt.store.audit.entries(approval_id=mail)
    assert trail[-1].event == "cancelled"
