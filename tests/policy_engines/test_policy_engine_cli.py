"""`hitl validate` loads and checks a ``source:`` rule's policies (Cedar syntax, its schema, the mapping's
annotations) before anything runs; `hitl policy explain` shows the engine's answer for a call (issue 71). Both as a
person runs them: the `hitl` command in a new process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.policy_engines.opa_data_api import opa_data_api

FIXTURES = Path(__file__).parent / "fixtures"

CONFIG = """\
roles: {finance: [U_FIN1, U_FIN2, U_FIN3]}
policy:
  tools: {refund: {tier: notify}}
  rules:
    - name: desk
      tools: [refund]
      source: SOURCE
"""

FLOW = "name: flow\nsteps:\n  - {type: gate, id: ok, prompt: go on?}\n"


def _hitl(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "HITL_STORE": f"sqlite:///{tmp_path}/hitl.db", "HITL_CONFIG": str(tmp_path / "hitl.yaml")}
    for name in ("HITL_API_URL", "HITL_NOW", "HITL_REVIEWER"):
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-m", "hitl", *args, "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def _desk(tmp_path: Path, source: str) -> None:
    for name in ("refunds.cedar", "refunds.cedarschema"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "hitl.yaml").write_text(CONFIG.replace("SOURCE", source))
    (tmp_path / "flow.yaml").write_text(FLOW)


CEDAR = "{cedar: {policies: [refunds.cedar], schema: refunds.cedarschema}}"


def test_validate_finds_what_the_cedar_engine_and_the_mapping_cannot_read(tmp_path: Path) -> None:
    _desk(tmp_path, CEDAR)
    assert _hitl(tmp_path, "validate", "flow.yaml") == (0, {"valid": True, "problems": []})

    policies = (FIXTURES / "refunds.cedar").read_text()
    (tmp_path / "refunds.cedar").write_text(
        policies.replace('@tier("escalate")', '@tier("urgent")').replace('@quorum("2")', '@quorum("lots")')
    )
    code, out = _hitl(tmp_path, "validate", "flow.yaml")
    assert code == 2
    found = [(p["field"], p["line"], p["message"]) for p in out["problems"]]
    assert [f[:2] for f in found] == [("policy.rules.0.source", 7)], found
    assert "huge-refund: tier 'urgent' is none of" in found[0][2], found

    (tmp_path / "refunds.cedar").write_text(policies + "\npermit (principal, action")
    code, out = _hitl(tmp_path, "validate", "flow.yaml")
    assert code == 2 and "not valid Cedar" in out["problems"][0]["message"], out

    # Against its schema: an argument the schema does not declare.
    (tmp_path / "refunds.cedar").write_text(policies.replace("context.args.amount > 5000", "context.args.total > 5"))
    code, out = _hitl(tmp_path, "validate", "flow.yaml")
    assert code == 2 and "refunds.cedarschema" in out["problems"][0]["message"], out

    (tmp_path / "refunds.cedar").unlink()
    code, out = _hitl(tmp_path, "validate", "flow.yaml")
    assert code == 2 and "cannot read refunds.cedar" in out["problems"][0]["message"], out


def test_policy_explain_shows_the_engines_answer(tmp_path: Path) -> None:
    """The same call explained under Cedar and under Rego (the real OPA, over HTTP): the tier, role and quorum the
    engine gave, and its answer with the rule id that made it."""
    call = ("policy", "explain", "refund", "--args", '{"amount": 6000, "customer": "c1"}')
    _desk(tmp_path, CEDAR)
    code, cedar = _hitl(tmp_path, *call)
    assert code == 0, cedar
    assert (cedar["tier"], cedar["required_role"], cedar["quorum"], cedar["rule"]) == ("escalate", "finance", 2, "desk")
    said = [f["reason"] for f in cedar["fired"] if f["rule"] == "desk"]
    assert said == ["desk: Cedar refunds.cedar answered tier escalate, role finance, quorum 2 (rule huge-refund)"]

    with opa_data_api(FIXTURES / "refunds.rego") as url:
        _desk(tmp_path, f"{{opa: {{url: '{url}', path: hitl/refunds/decision, timeout: 5}}}}")
        code, rego = _hitl(tmp_path, *call)
    assert code == 0, rego
    assert (rego["tier"], rego["required_role"], rego["quorum"], rego["rule"]) == ("escalate", "finance", 2, "desk")
    said = [f["reason"] for f in rego["fired"] if f["rule"] == "desk"]
    assert said == ["desk: OPA hitl/refunds/decision answered tier escalate, role finance, quorum 2 (rule huge-refund)"]

    # OPA gone: the explanation says the engine failed and that a person decides.
    code, down = _hitl(tmp_path, *call)
    assert code == 0 and down["tier"] == "approve", down
    assert "failed (OPA could not be asked" in down["fired"][-1]["reason"], down


def test_validate_reads_a_quorum_of_digits_that_are_not_a_number_as_a_problem(tmp_path: Path) -> None:
    """``@quorum("²")``: a digit to Python's ``str.isdigit`` that ``int`` cannot read; a problem, not a traceback."""
    _desk(tmp_path, CEDAR)
    policies = (FIXTURES / "refunds.cedar").read_text()
    (tmp_path / "refunds.cedar").write_text(policies.replace('@quorum("2")', '@quorum("²")'))
    code, out = _hitl(tmp_path, "validate", "flow.yaml")
    assert code == 2 and "quorum must be a whole number" in out["problems"][0]["message"], out
