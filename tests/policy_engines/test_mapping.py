"""How an engine's answer maps onto a call (issue 71, items 1 and 2), on the compiled policy: an answer raises a
call and never lowers it below its tool's tier; an answer the mapping cannot read, or none, asks a person at the
tool's tier, at least approve; a deny never runs; the card names the policy and rule ids, never a rule's body."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Tier
from hitl.engine.domain.policy import Policy, PolicyContext, Verdict
from hitl.engine.domain.policy_source import ExternalAnswer, from_cedar, from_rego

CONFIG = """\
policy:
  allowed_tools: [lookup]
  tools: {refund: {tier: notify}, close_account: {tier: escalate}, export: {tier: approve}}
  rules:
    - name: desk
      source: {opa: {url: "http://127.0.0.1:9", path: hitl/desk/decision}}
"""


def _policy() -> Policy:
    return parse_config(CONFIG).build_policy()


def _judged(tool: str, answer: ExternalAnswer | None) -> Verdict:
    external = {"desk": answer} if answer is not None else {}
    return _policy().evaluate(tool, {"amount": 9000}, PolicyContext(now=0.0, external=external))


def test_an_answer_raises_a_call_and_never_lowers_it() -> None:
    assert _judged("refund", from_rego({"tier": "approve", "role": "finance", "quorum": 2})).tier is Tier.APPROVE
    # Below the tool's own tier: the tool's stands, for allow and for a lower tier alike.
    assert _judged("export", from_rego({"allow": True})).tier is Tier.APPROVE
    assert _judged("close_account", from_rego({"tier": "notify"})).tier is Tier.ESCALATE
    assert _judged("lookup", from_rego({"tier": "auto"})).tier is Tier.AUTO
    v = _judged("refund", from_rego({"tier": "escalate", "role": "finance", "quorum": 2, "rule": "huge"}))
    assert (v.tier, v.required_role, v.quorum, v.rule) == (Tier.ESCALATE, "finance", 2, "desk")


@pytest.mark.parametrize(
    "result",
    [
        None,  # an undefined document
        "approve",  # not an object
        {"tier": "urgent"},  # a tier the mapping does not know
        {"tier": "approve", "quorum": "lots"},
        {"tier": "approve", "quorum": 0},
        {"tier": "approve", "role": "finance; drop"},
        {"allow": "yes"},  # allow must be true itself
        {},
    ],
)
def test_an_answer_the_mapping_cannot_read_asks_a_person(result: object) -> None:
    answer = from_rego(result)
    assert answer.outcome == "failed"
    for tool, least in [("lookup", Tier.APPROVE), ("refund", Tier.APPROVE), ("close_account", Tier.ESCALATE)]:
        v = _judged(tool, answer)
        assert (v.tier, v.denied) == (least, False), (tool, result)
        assert "The policy OPA hitl/desk/decision (rule desk) could not be checked, so a person decides." in v.why


def test_no_answer_asks_a_person_and_a_deny_never_runs() -> None:
    assert _judged("lookup", None).tier is Tier.APPROVE
    denied = _judged("lookup", from_rego({"tier": "deny", "rule": "no-exports"}))
    assert denied.denied and denied.why == (
        "The policy OPA hitl/desk/decision (rule desk/no-exports) forbids this call.",
    )


def test_cedar_gives_the_strictest_forbid_and_reads_its_annotations() -> None:
    matched = [
        ("big", "forbid", {"tier": "approve", "role": "finance"}),
        ("huge", "forbid", {"tier": "escalate", "role": "finance", "quorum": "2"}),
    ]
    assert from_cedar("Deny", matched) == ExternalAnswer("tier", Tier.ESCALATE, "finance", 2, "huge")
    assert from_cedar("Deny", [("wires", "forbid", {})]).outcome == "deny"
    assert from_cedar("Allow", [("ok", "permit", {})]).outcome == "allow"
    # Nothing permits it and no forbid says what to do: a person decides.
    assert from_cedar("Deny", []).outcome == "failed"
    assert from_cedar("Deny", [("odd", "forbid", {"tier": "approve", "quorum": "21"})]).outcome == "failed"
