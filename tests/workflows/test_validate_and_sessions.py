"""`hitl validate` lists every problem with its line; `hitl sessions` shows what paused runs ask; concurrent
pauses (two workers waiting at once) are each stored, shown and resumed by a decision on either."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.workflows.conftest import RESEARCH, Desk, Hitl

BROKEN = """\
name: broken
vars: {topic: x}
runtime: {provider: scripted, script: script.yaml}
tools:
  search: {function: desk:search}
agents:
  researcher: {prompt: "about {{ vars.topic }}", tools: [search, missing_tool]}
pattern:
  type: workflow
  steps:
    - {id: a, agent: researcher, input: x, depends_on: [b]}
    - {id: b, agent: ghost, input: y, depends_on: [a]}
    - {id: c, tool: nothing}
"""

SHAPES = """\
name: shapes
steps:
  - id: 1bad
    tool: t
    bogus: 1
  - {type: gate}
  - {type: teleport, id: z}
"""

TEMPLATES = """\
name: templates
vars: {topic: x}
tools:
  search: {function: desk:search}
steps:
  - {id: first, tool: search, args: {query: "{{ steps.later.output }}"}}
  - {id: later, tool: search, args: {query: "{{ vars.colour }} {{ broken"}}
"""


def test_validate_lists_every_problem_with_its_line(hitl: Hitl, tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("{}\n")
    for name, text in (("broken.yaml", BROKEN), ("shapes.yaml", SHAPES), ("templates.yaml", TEMPLATES)):
        (tmp_path / name).write_text(text)
    broken = hitl("validate", str(tmp_path / "broken.yaml"), expect=2).out
    assert broken["valid"] is False
    assert [(p["line"], p["field"]) for p in broken["problems"]] == [
        (5, "tools.search.function"),  # no desk.py beside this file: its import fails too, in the same pass
        (7, "agents.researcher.tools[1]"),
        (10, "pattern.steps"),  # the cycle a -> b -> a
        (12, "pattern.steps[1].agent"),
        (13, "pattern.steps[2].tool"),
    ]
    assert "a -> b -> a" in broken["problems"][2]["message"]
    shapes = hitl("validate", str(tmp_path / "shapes.yaml"), expect=2).out["problems"]
    assert [(p["line"], p["field"]) for p in shapes] == [
        (3, "steps[0].id"),
        (5, "steps[0].bogus"),
        (6, "steps[1].id"),
        (6, "steps[1].prompt"),
        (7, "steps[2]"),
    ]
    assert "tool, gate or agent" in shapes[-1]["message"]
    templates = hitl("validate", str(tmp_path / "templates.yaml"), expect=2).out["problems"]
    assert [(p["line"], p["field"]) for p in templates] == [
        (4, "tools.search.function"),
        (6, "steps[0].args.query"),
        (7, "steps[1].args.query"),
    ]
    assert "not an earlier step" in templates[1]["message"] and "template error" in templates[2]["message"]


def test_validate_accepts_every_example_and_prints_for_people(hitl: Hitl, tmp_path: Path) -> None:
    for path in sorted(RESEARCH.glob("*.yaml")):
        if path.name not in ("hitl.yaml", "script.yaml"):
            assert hitl("validate", str(path), expect=0).out == {"valid": True, "problems": []}


def test_sessions_show_gives_the_interrupt_details(hitl: Hitl) -> None:
    first = hitl("run", str(RESEARCH / "workflow.yaml"), "--var", "topic=solid-state batteries", expect=4)
    session = str(first.out["session_id"])
    listed = hitl("sessions", "list", expect=0).out["sessions"]
    assert listed == [
        {
            "session_id": session,
            "workflow": "research-report",
            "status": "paused",
            "waiting": [
                {
                    "interrupt_id": first.approval_id,
                    "interrupt_type": "manual_gate",
                    "interrupt_name": "review_research",
                }
            ],
        }
    ]
    shown = hitl("sessions", "show", session, expect=0).out
    assert shown["status"] == "paused" and shown["steps_done"] == ["research"]
    (gate,) = shown["interrupts"]
    assert gate["prompt"] == "Review the research before it is analysed."
    assert gate["preview"].startswith("Findings: solid electrolytes")
    assert set(gate["options"]) == {"approve", "reject", "feedback"}
    assert gate["fallback_action"] == "continue" and gate["role"] == "editors"
    assert gate["timeout_at"] > gate["created_at"]
    at_tool = hitl("resume", first.approval_id, "--approve", "--as", "U_EDITOR1", expect=4)
    (tool,) = hitl("sessions", "show", session, expect=0).out["interrupts"]
    assert tool["interrupt_type"] == "tool_approval" and tool["interrupt_name"] == "publish_report"
    assert tool["evidence"] == "writer: Publishing the report." and "modify" in tool["options"]
    assert tool["interrupt_id"] == at_tool.approval_id
    missing = hitl("sessions", "show", "ses_NOPE", expect=1).out
    assert missing["error"]["code"] == "not_found"


TWO_EMAILS = {
    "name": "two-emails",
    "runtime": {"provider": "scripted", "script": "script.yaml"},
    "tools": {"send_email": {"function": "desk:send_email", "idempotent": True}},
    "agents": {
        "planner": {"prompt": "Plan."},
        "investigator": {"prompt": "Investigate.", "tools": ["send_email"]},
    },
    "pattern": {
        "type": "orchestrator_workers",
        "orchestrator": {"agent": "planner", "input": "Plan"},
        "workers": {"agent": "investigator", "input": "Investigate {{ task }}", "max_parallel": 2},
    },
}
SCRIPT = {
    "planner": [{"turns": [{"say": '["safety", "safety again"]'}]}],
    "investigator": [
        {
            "turns": [
                {
                    "say": "Telling the officer.",
                    "call": "send_email",
                    "args": {"to": "a@example.com", "subject": "s", "body": "b"},
                },
                {"say": "Done."},
            ]
        }
    ],
}


def test_two_workers_waiting_at_once_resume_on_either_decision(hitl: Hitl, desk: Desk, tmp_path: Path) -> None:
    shutil.copy(RESEARCH / "desk.py", tmp_path / "desk.py")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT))
    flow = tmp_path / "two.yaml"
    flow.write_text(yaml.safe_dump(TWO_EMAILS))
    first = hitl("run", str(flow), expect=4)
    session = str(first.out["session_id"])
    waits = hitl("sessions", "show", session, expect=0).out["interrupts"]
    assert sorted(w["step"] for w in waits) == ["workers-1", "workers-2"]  # both stored, both shown
    other, other_step = next((w["interrupt_id"], w["step"]) for w in waits if w["interrupt_id"] != first.approval_id)
    # Deciding the approval the run does not name first still resumes it: that worker finishes, the other waits.
    still = hitl("resume", other, "--approve", "--as", "U_EDITOR1", expect=4)
    assert still.approval_id == first.approval_id and desk.tools() == ["send_email"]
    assert still.out["outputs"][other_step] == "Done." and len(still.out["outputs"]) == 2  # + the plan
    done = hitl("resume", first.approval_id, "--approve", "--as", "U_EDITOR1", expect=0)
    assert done.out["outputs"]["workers"] == ["Done.", "Done."]
    assert desk.tools() == ["send_email", "send_email"]
    desk.assert_nothing_twice()


UNEVALUABLE = """\
policy:
  tools:
    refund:
      tier: approve
      schema:
        type: object
        properties: {order_id: {type: string}, amount: {type: number}, customer_id: {type: string}}
        required: [order_id]
    send: {tier: approve, schema: {type: object, properties: {to: {type: string}}, required: [to]}}
  rules:
    - name: big
      tools: [refund]
      when: "args.amount > 500"
      tier: escalate
    - name: guarded
      tools: [refund]
      when: "args.amount is defined and args.amount > 500"
      tier: escalate
    - name: split
      tools: [refund]
      rolling_sum: {subject: args.customer_id, value: args.amount, window: 1h, threshold: 500}
      tier: escalate
    - name: outbound
      tools: [send]
      when: "args.to.endswith('@example.com')"
      tier: escalate
"""


def test_validate_reports_policy_conditions_that_fail_on_arguments_the_schema_allows(
    hitl: Hitl, tmp_path: Path
) -> None:
    """A rule over an optional argument would fail closed on every call without it: a configuration error that
    `hitl validate` names with its line in hitl.yaml, before anything runs."""
    (tmp_path / "hitl.yaml").write_text(UNEVALUABLE)
    (tmp_path / "flow.yaml").write_text("name: flow\nsteps:\n  - {type: gate, id: ok, prompt: go on?}\n")
    config = ("--config", str(tmp_path / "hitl.yaml"))
    out = hitl("validate", str(tmp_path / "flow.yaml"), *config, expect=2).out
    found = [(Path(p["file"]).name, p["line"], p["field"]) for p in out["problems"]]
    assert found == [("hitl.yaml", 13, "policy.rules.0.when"), ("hitl.yaml", 21, "policy.rules.2.subject")], found
    assert "make the argument required" in out["problems"][0]["message"].lower()
    (tmp_path / "hitl.yaml").write_text(
        UNEVALUABLE.replace("required: [order_id]", "required: [order_id, amount, customer_id]")
    )
    assert hitl("validate", str(tmp_path / "flow.yaml"), *config).out["valid"] is True


def test_validate_imports_every_tool_function(hitl: Hitl, tmp_path: Path) -> None:
    """A `function:` that does not import is found by validate, not by the step that calls it at run time."""
    (tmp_path / "mytools.py").write_text("def ok(x: int) -> int:\n    return x\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('no database configured')\n")
    (tmp_path / "flow.yaml").write_text(
        "name: flow\ntools:\n"
        "  good: {function: mytools:ok}\n"
        "  typo: {function: mytools:okk}\n"
        "  gone: {function: nosuchmodule:f}\n"
        "  loud: {function: broken:f}\n"
        "steps:\n  - {id: a, tool: good, args: {x: 1}}\n"
    )
    out = hitl("validate", str(tmp_path / "flow.yaml"), expect=2).out
    found = {p["field"]: p["message"] for p in out["problems"]}
    assert set(found) == {"tools.typo.function", "tools.gone.function", "tools.loud.function"}, found
    assert "mytools:okk" in found["tools.typo.function"] and "no database configured" in found["tools.loud.function"]


EIGHT = """\
name: eight
vars: {to: null}
tools:
  look_up: {function: mytools:nope}
  pay: {function: mytools:ok}
steps:
  - id: lookup
    tool: look_upp
    args: {name: "{{ vars.too }}"}
  - id: lookup
    tool: pay
    args: {to: "{{ steps.nothere.output }}", amount: "{{ vars.to "}
  - id: pay
    tool: pay
    retries: 3
  - {id: gate, type: gate, prompt: ok?, colour: red}
"""


def test_validate_reports_every_problem_in_one_pass(hitl: Hitl, tmp_path: Path) -> None:
    """Eight problems of every kind (a misspelt key, references, templates, an import) come out of one run: a
    misspelt key no longer hides the rest, and a reference problem no longer hides the templates."""
    (tmp_path / "mytools.py").write_text("def ok(x: int) -> int:\n    return x\n")
    (tmp_path / "flow.yaml").write_text(EIGHT)
    found = hitl("validate", str(tmp_path / "flow.yaml"), expect=2).out["problems"]
    assert [(p["line"], p["field"]) for p in found] == [
        (4, "tools.look_up.function"),
        (8, "steps[0].tool"),
        (9, "steps[0].args.name"),
        (10, "steps[1]"),
        (12, "steps[1].args.to"),
        (12, "steps[1].args.amount"),
        (15, "steps[2].retries"),
        (16, "steps[3].colour"),
    ], found
    # A shape problem that is not a stray key still leaves the tools and the templates' syntax checked.
    (tmp_path / "flow.yaml").write_text(EIGHT.replace("  - id: pay\n", "  - idd: pay\n"))
    fields = [p["field"] for p in hitl("validate", str(tmp_path / "flow.yaml"), expect=2).out["problems"]]
    assert {"tools.look_up.function", "steps[1].args.amount", "steps[2].id", "steps[2].idd"} <= set(fields), fields


def test_validate_reports_a_backup_role_nobody_holds_and_a_value_to_confirm_the_tool_lacks(
    hitl: Hitl, tmp_path: Path
) -> None:
    (tmp_path / "hitl.yaml").write_text(
        """
roles: {support: [U_S1], finance: [U_F1]}
policy:
  tools:
    pay:
      tier: approve
      role: support
      confirm: [amonut]
      hand_on_after: 50%
      backup_role: finanse
      schema: {type: object, properties: {amount: {type: number}}, required: [amount]}
  rules:
    - {name: big, tools: [pay], when: "args.amount > 500", tier: escalate, confirm: [amount],
       hand_on_after: 10m, backup_role: finance}
"""
    )
    (tmp_path / "flow.yaml").write_text("name: flow\nsteps:\n  - {type: gate, id: ok, prompt: go on?}\n")
    out = hitl("validate", str(tmp_path / "flow.yaml"), "--config", str(tmp_path / "hitl.yaml"), expect=2).out
    found = [(p["line"], p["field"]) for p in out["problems"]]
    assert found == [(10, "policy.tools.pay.backup_role"), (8, "policy.tools.pay.confirm")], found
    assert "nobody would get it" in out["problems"][0]["message"]
    assert "amonut" in out["problems"][1]["message"]
