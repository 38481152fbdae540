from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import Tier
from hitl.engine.domain.policy import Policy, PolicyContext, Verdict, WindowStats
from hitl.engine.errors import EngineError, ErrorCode

BASE = """
requester: agent:riley
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
  finance: [U_FIN1, U_FIN2, U_FIN3]
policy:
  allowed_tools: [look_up_order, "!delete_customer"]
  denied_tools: [drop_database]
  tools:
    refund: {tier: approve, role: support}
    delete_customer: {tier: approve, role: support}
    send_email: {tier: notify}
  rules:
    - name: large_refund
      tools: [refund]
      when: "args.amount > 500"
      tier: escalate
      role: finance
      quorum: 2
    - name: night
      tools: [send_email]
      off_hours: {timezone: Europe/Berlin, start: "20:00", end: "07:00", weekends: true}
      tier: approve
    - name: burst
      tools: [send_email]
      velocity: {subject: args.to, max: 3, window: 1h}
      tier: approve
    - name: split
      tools: [refund]
      rolling_sum: {subject: args.customer_id, value: args.amount, window: 24h, threshold: 120}
      tier: escalate
      role: finance
      quorum: 2
"""

NOON = datetime(2026, 11, 18, 12, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()  # a Wednesday


@pytest.fixture
def policy() -> Policy:
    return parse_config(BASE).build_policy()


def ctx(**kw: object) -> PolicyContext:
    return PolicyContext(now=kw.pop("now", NOON), **kw)  # type: ignore[arg-type]


def _routing(v: Verdict) -> tuple[Tier, str | None, int, str, bool]:
    """Who a verdict asks and how: the tier, the approvers' role, the quorum, the rule that set them, and whether a
    Trust may let the next such call through."""
    return (v.tier, v.required_role, v.quorum, v.rule, v.trustable)


def test_tiers_roles_and_quorum(policy: Policy) -> None:
    assert policy.evaluate("look_up_order", {}, ctx()).tier is Tier.AUTO
    v = policy.evaluate("refund", {"amount": 100, "customer_id": "C"}, ctx())
    assert _routing(v) == (Tier.APPROVE, "support", 1, "tool_tier", True)
    big = policy.evaluate("refund", {"amount": 899, "customer_id": "C"}, ctx())
    assert _routing(big) == (Tier.ESCALATE, "finance", 2, "large_refund", False)
    assert any("large_refund" in r for r in big.reasons)


def test_unknown_tools_fail_closed_and_denied_never_run(policy: Policy) -> None:
    v = policy.evaluate("wire_money", {}, ctx())
    assert v.tier is Tier.APPROVE and v.rule == "unknown_tool" and not v.trustable
    d = policy.evaluate("drop_database", {}, ctx())
    assert d.denied
    deny_unknown = parse_config("policy: {denied_tools: ['*'], allowed_tools: [a]}").build_policy()
    assert deny_unknown.evaluate("zzz", {}, ctx()).denied and not deny_unknown.evaluate("a", {}, ctx()).denied


def test_precedence_bang_beats_trust_beats_star(policy: Policy) -> None:
    trusted = ctx(trusted_tools=frozenset({"delete_customer", "refund"}))
    bang = policy.evaluate("delete_customer", {}, trusted)
    assert bang.tier is Tier.APPROVE and bang.rule == "always_ask" and not bang.trustable
    t = policy.evaluate("refund", {"amount": 10, "customer_id": "C"}, trusted)
    assert t.tier is Tier.AUTO and t.rule == "trusted"
    # trust never lowers what a dynamic rule raises
    assert policy.evaluate("refund", {"amount": 900, "customer_id": "C"}, trusted).tier is Tier.ESCALATE
    star = parse_config("policy: {allowed_tools: ['*', '!rm']}").build_policy()
    assert star.evaluate("anything", {}, ctx()).tier is Tier.AUTO
    assert star.evaluate("rm", {}, ctx()).tier is Tier.APPROVE


def test_off_hours_in_the_configured_timezone(policy: Policy) -> None:
    assert policy.evaluate("send_email", {"to": "x"}, ctx()).tier is Tier.NOTIFY
    night = datetime(2026, 11, 18, 22, 30, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
    v = policy.evaluate("send_email", {"to": "x"}, ctx(now=night))
    assert v.tier is Tier.APPROVE and "22:30" in v.reasons[-1]
    saturday = datetime(2026, 11, 21, 12, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
    assert policy.evaluate("send_email", {"to": "x"}, ctx(now=saturday)).tier is Tier.APPROVE


def test_velocity_and_split_transactions(policy: Policy) -> None:
    keys = policy.window_keys("send_email", {"to": "bob"})
    assert list(keys) == ["burst:bob"]
    ok = policy.evaluate("send_email", {"to": "bob"}, ctx(windows={"burst:bob": WindowStats(count=2)}))
    assert ok.tier is Tier.NOTIFY
    hot = policy.evaluate("send_email", {"to": "bob"}, ctx(windows={"burst:bob": WindowStats(count=3)}))
    assert hot.tier is Tier.APPROVE and "4 requests" in hot.reasons[-1]
    args = {"customer_id": "C7", "amount": 49.0}
    assert policy.window_keys("refund", args) == {"split:C7": (86400.0, 49.0)}
    two = policy.evaluate("refund", args, ctx(windows={"split:C7": WindowStats(count=1, total=49.0)}))
    assert two.tier is Tier.APPROVE
    three = policy.evaluate("refund", args, ctx(windows={"split:C7": WindowStats(count=2, total=98.0)}))
    assert (three.tier, three.required_role, three.quorum) == (Tier.ESCALATE, "finance", 2)
    assert "split transaction" in three.reasons[-1]
    assert "147 within 1d: 49 now + 98 from 2 earlier requests" in three.reasons[-1]
    # One request alone over the limit: it fires, and says so, with no talk of earlier requests or splitting.
    alone = policy.evaluate("refund", {"customer_id": "C8", "amount": 900.0}, ctx())
    assert alone.tier is Tier.ESCALATE
    assert alone.reasons[-1].endswith("900 alone is over the 1-day limit of 120 for this subject"), alone.reasons
    assert "earlier" not in alone.reasons[-1] and "split transaction" not in alone.reasons[-1]


def test_rule_that_cannot_be_evaluated_fires(policy: Policy) -> None:
    v = policy.evaluate("refund", {"customer_id": "C"}, ctx())  # no amount
    assert v.tier is Tier.ESCALATE and "fail closed" in " ".join(v.reasons)
    v2 = policy.evaluate("refund", {"customer_id": "C", "amount": "lots"}, ctx())
    assert v2.tier is Tier.ESCALATE


def test_step_floor(policy: Policy) -> None:
    v = policy.evaluate("look_up_order", {}, ctx(min_tier=Tier.APPROVE))
    assert v.tier is Tier.APPROVE and v.rule == "step_requires_approval"


def test_explain_reads_well(policy: Policy) -> None:
    text = policy.evaluate("refund", {"amount": 899, "customer_id": "C"}, ctx()).explain()
    assert text.splitlines()[0] == "refund: escalate, approver role finance, 2 distinct approvers"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("policy:\n  tools:\n    refund:\n      tier: sometimes\n", 4, "policy.tools.refund.tier"),
        ("roles: {a: [x]}\npolicy:\n  rules:\n    - name: r\n      tier: approve\n", 4, "policy.rules[0]"),
        ("policy:\n  tools:\n    refund: {role: ghosts}\n", 1, "(top level)"),
        ("policy:\n  bogus: 1\n", 2, "policy.bogus"),
        ("policy:\n  tools:\n    refund:\n      timeout: soon\n", 4, "policy.tools.refund.timeout"),
    ],
)
def test_bad_config_names_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(EngineError) as err:
        parse_config(text, source="hitl.yaml")
    assert err.value.code is ErrorCode.POLICY_INVALID
    assert err.value.message.startswith(f"hitl.yaml:{line}: config field '{field}'"), err.value.message


def test_bad_yaml_and_bad_expressions_are_clear() -> None:
    with pytest.raises(EngineError, match=r"hitl.yaml:3: config is not valid YAML"):
        parse_config("policy:\n  tools: [unclosed\n", source="hitl.yaml")
    with pytest.raises(EngineError, match=r"cannot compile"):
        parse_config("policy:\n  rules:\n    - {name: r, when: 'args.amount >', tier: approve}\n")
    with pytest.raises(EngineError, match=r"unknown timezone"):
        parse_config("policy:\n  rules:\n    - {name: r, off_hours: {timezone: Mars/Base}, tier: approve}\n")
    with pytest.raises(EngineError, match="only fall back to 'cancel'"):
        parse_config("policy: {tools: {refund: {fallback: continue}}}")


def test_a_verdict_only_the_name_decides_is_shared_and_anything_else_is_evaluated(policy: Policy) -> None:
    # look_up_order: allowed, no rule names it -> the same verdict evaluate gives, whatever the arguments
    static = policy.static_verdict("look_up_order")
    assert static == policy.evaluate("look_up_order", {"order_id": "1"}, ctx())
    assert static is policy.static_verdict("look_up_order")
    assert policy.static_verdict("drop_database") == policy.evaluate("drop_database", {}, ctx())
    assert policy.static_verdict("drop_database").denied  # type: ignore[union-attr]
    assert policy.static_verdict("delete_customer").rule == "always_ask"  # type: ignore[union-attr]
    # rules can fire on refund (amount) and send_email (hours, velocity)
    for tool in ("refund", "send_email"):
        assert policy.static_verdict(tool) is None, tool
    trust = parse_config("policy: {tools: {t: {tier: approve}}}").build_policy()
    assert trust.static_verdict("t") is None  # a session's trust grant could make it auto
