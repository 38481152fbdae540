"""Each of the seven patterns pauses at a gate and at a tool approval inside an agent, resumes from a fresh
process, and the research desk's effect log shows that nothing ran twice."""

from __future__ import annotations

import pytest

from hitl.engine.workflow.definition import load_workflow
from tests.workflows.conftest import RESEARCH, Desk, Hitl

EDITOR = ("--as", "U_EDITOR1")


def test_chain_research_review_analysis_report(hitl: Hitl, desk: Desk) -> None:
    """The proposal's research workflow: the gate, then the writer's publish_report inside its agent."""
    first = hitl("run", str(RESEARCH / "workflow.yaml"), "--var", "topic=solid-state batteries", expect=4)
    assert first.tool == "gate:review_research" and desk.tools() == ["search"]
    session = str(first.out["session_id"])
    at_tool = hitl("resume", first.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    assert at_tool.out["approval"]["args"]["title"] == "Solid-state batteries in 2025"
    # A reviewer's Modify is what runs inside the agent, and what the agent is told ran.
    edited = '{"title": "Solid-state batteries (reviewed)", "body": "Edited."}'
    done = hitl("resume", at_tool.approval_id, "--modify", "--args", edited, *EDITOR, expect=0)
    assert done.out["outputs"]["report"] == "The report is published."
    assert desk.tools() == ["search", "publish_report"]
    assert desk.calls()[1]["title"] == "Solid-state batteries (reviewed)"
    desk.assert_nothing_twice()
    again = hitl("resume", session, expect=0)  # a finished run resumed again runs nothing
    assert again.status == "completed" and len(desk.calls()) == 2


def test_chain_gate_feedback_reruns_the_agent_with_the_feedback(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "workflow.yaml"), "--var", "topic=solid-state batteries", expect=4)
    second = hitl("resume", first.approval_id, "--feedback", "more sources", *EDITOR, expect=4)
    assert second.tool == "gate:review_research" and second.approval_id != first.approval_id
    # The researcher ran again (a new round: its own conversation and its own search), with the feedback.
    searches = [c for c in desk.calls() if c["tool"] == "search"]
    assert len(searches) == 2 and searches[0]["key"] != searches[1]["key"]
    desk.assert_nothing_twice()


def test_workflow_dag_runs_independent_steps_then_the_gate_then_the_tool(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "dag.yaml"), expect=4)
    assert first.tool == "gate:review_research"
    assert sorted(desk.tools()) == ["search", "search"]  # research and market, both before the gate
    at_tool = hitl("resume", first.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert desk.tools()[-1] == "publish_report" and len(desk.calls()) == 3
    desk.assert_nothing_twice()


def test_parallel_a_paused_branch_pauses_only_what_depends_on_it(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "parallel.yaml"), expect=4)
    assert first.tool == "gate:review_research"
    # The business branch finished while the tech branch waits; the reduce step (the report) did not start.
    assert first.out["outputs"]["market"].startswith("Market:")
    assert "report" not in first.out["outputs"]
    assert sorted(c["query"] for c in desk.calls()) == ["solid-state batteries", "solid-state batteries market"]
    at_tool = hitl("resume", first.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert desk.tools().count("search") == 2 and desk.tools()[-1] == "publish_report"
    desk.assert_nothing_twice()


def test_routing_records_the_route_and_follows_it(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "routing.yaml"), expect=4)
    assert first.tool == "gate:review_research" and "route deep chosen" in first.out["history"]
    trail = hitl("audit", expect=0).out["audit"]
    assert any(e["event"] == "run_route_chosen" and "route deep" in e["detail"] for e in trail)
    at_tool = hitl("resume", first.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    done = hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert "quick_report" not in done.out["outputs"]  # the other route never ran
    assert desk.tools() == ["search", "publish_report"]
    desk.assert_nothing_twice()


def test_evaluator_optimizer_asks_a_person_after_n_rounds(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "evaluator.yaml"), expect=4)
    assert first.tool == "review:producer"  # two rounds scored 6 and 7, below 8
    assert "score 7 (needs 8)" in first.out["approval"]["args"]["preview"]
    assert [h for h in first.out["history"] if h.startswith("round")] == [
        "round 1: score 6 (needs 8)",
        "round 2: score 7 (needs 8)",
    ]
    # Feedback: another round, guided by the reviewer's words; it scores 9 and the draft is published.
    at_tool = hitl("resume", first.approval_id, "--feedback", "add the pilot-line numbers", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    assert at_tool.out["outputs"]["producer"].startswith("Draft 3")
    assert at_tool.out["outputs"]["evaluator"] == {"score": 9, "feedback": "Good."}
    hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert desk.tools() == ["publish_report"]
    desk.assert_nothing_twice()


def test_evaluator_optimizer_reject_stops_the_run(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "evaluator.yaml"), expect=4)
    stopped = hitl("resume", first.approval_id, "--reject", "--reason", "off topic", *EDITOR, expect=3)
    assert stopped.status == "rejected" and desk.calls() == []


@pytest.mark.slow
def test_orchestrator_workers_a_waiting_worker_pauses_only_itself(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "orchestrator.yaml"), expect=4)
    assert first.tool == "send_email"  # the safety investigator's e-mail, inside its agent
    outputs = first.out["outputs"]
    assert outputs["orchestrator"] == ["battery chemistry", "manufacturing cost", "safety"]
    # The other workers finished (the cost note is NOTIFY-tier: it ran without waiting).
    assert outputs["workers-1"].startswith("Chemistry") and outputs["workers-2"].startswith("Cost")
    assert sorted(desk.tools()) == ["save_note", "search"]
    notified = [e for e in hitl("audit", expect=0).out["audit"] if e["event"] == "notified"]
    assert len(notified) == 1 and "save_note ran with an FYI" in notified[0]["detail"]  # and `hitl serve` posts it
    at_gate = hitl("resume", first.approval_id, "--approve", *EDITOR, expect=4)
    assert at_gate.tool == "gate:review_findings"
    assert "Safety: no thermal runaway" in at_gate.out["approval"]["args"]["preview"]
    at_tool = hitl("resume", at_gate.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert sorted(desk.tools()) == ["publish_report", "save_note", "search", "send_email"]
    desk.assert_nothing_twice()


@pytest.mark.slow
def test_graph_follows_edges_and_feedback_revisits_a_node(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "graph.yaml"), expect=4)
    assert first.tool == "gate:check" and "research -> check" in first.out["history"]
    back = hitl("resume", first.approval_id, "--feedback", "cite the survey", *EDITOR, expect=4)
    assert back.tool == "gate:check" and back.approval_id != first.approval_id  # research visited again
    at_tool = hitl("resume", back.approval_id, "--approve", *EDITOR, expect=4)
    assert at_tool.tool == "publish_report"
    done = hitl("resume", at_tool.approval_id, "--approve", *EDITOR, expect=0)
    assert done.out["history"][-1] == "write -> end"
    assert desk.tools() == ["search", "search", "publish_report"]
    desk.assert_nothing_twice()


def test_graph_conditional_edge_skips_the_review(hitl: Hitl, desk: Desk) -> None:
    first = hitl("run", str(RESEARCH / "graph.yaml"), "--var", "skip_review=yes", expect=4)
    assert first.tool == "publish_report" and "research -> write" in first.out["history"]


def test_every_example_workflow_is_valid() -> None:
    names = {
        load_workflow(p).spec.flow.type for p in RESEARCH.glob("*.yaml") if p.name not in ("hitl.yaml", "script.yaml")
    }
    assert names == {"chain", "workflow", "parallel", "routing", "evaluator_optimizer", "orchestrator_workers", "graph"}
