"""What approving takes besides a click: declared on a tier, a rule or a tool; typed values compared exactly with
what runs; never let through by a Trust."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.confirmation import NUMBER_FORM, confirmation_problem, same_value, typed_text
from hitl.engine.domain.models import DecisionKind, Tier
from hitl.engine.domain.policy import PolicyContext
from hitl.engine.errors import EngineError
from hitl.testing import make_approval

CONFIG = """
requester: agent:riley
roles: {payments: [U_PAY1, U_PAY2]}
policy:
  tools:
    pay: {tier: approve}
    wire: {tier: approve, confirm: [iban]}
    note: {tier: approve}
  tiers:
    escalate: {confirm: [amount], approve_reason: required}
  rules:
    - {name: large, tools: [pay], when: "args.amount > 500", tier: escalate}
    - {name: new_payee, tools: [pay], when: "args.to == 'V-NEW'", tier: approve, confirm: [to]}
"""


@pytest.mark.parametrize(
    ("typed", "value", "same"),
    [
        ("5000", 5000, True),
        ("5,000.00", 5000, True),
        (" 5000.0 ", 5000.0, True),
        ("4999.999", 5000, False),
        ("1,000", 1000, True),
        ("1000", 1000, True),
        ("1,000.5", 1000.5, True),
        # One form only: a comma between groups of three, ASCII digits, no exponent, no sign. Anything else is not
        # read as whichever number would match.
        ("10,00", 1000, False),  # ten, where the comma is the decimal point
        ("1,0,0,0", 1000, False),
        ("10,000", 1000, False),
        ("1,00", 100, False),
        ("1000,", 1000, False),
        ("\uff11\uff10\uff10\uff10", 1000, False),  # fullwidth
        ("\u0661\u0660\u0660\u0660", 1000, False),  # Arabic-Indic
        ("5e3", 5000, False),
        ("+1000", 1000, False),
        ("-1000", -1000, False),
        ("1_000", 1000, False),
        (".5", 0.5, False),
        ("1000.", 1000, False),
        ("0.30000000000000004", 0.1 + 0.2, True),
        ("0.3", 0.1 + 0.2, False),  # never rounded to what it looks like
        ("NaN", 5000, False),
        ("Infinity", 5000, False),
        ("", 0, False),
        ("true", True, True),
        ("V-NEW", "V-NEW", True),
        ("v-new", "V-NEW", False),
        ("Caf\u00e9", "Cafe\u0301", True),  # composed and decomposed: the same after NFC
        ("V-NEW", "V\u2011NEW", False),  # a look-alike hyphen is another value
        (5000, 5000, True),
        (5000.5, 5000, False),
    ],
)
def test_a_typed_value_is_the_value_that_runs_or_not(typed: object, value: object, same: bool) -> None:
    assert same_value(typed, value) is same


def test_a_value_is_shown_as_it_would_be_typed() -> None:
    assert [typed_text(v) for v in (5000, 12.5, 1e-7, "x", None, True, {"b": 1, "a": 2})] == [
        "5000",
        "12.5",
        "0.0000001",
        "x",
        "null",
        "true",
        '{"a": 2, "b": 1}',
    ]


def test_the_policy_asks_for_attention_from_tiers_rules_and_tools() -> None:
    policy = parse_config(CONFIG).build_policy()
    now = PolicyContext(now=0.0)
    big = policy.evaluate("pay", {"to": "V-NEW", "amount": 5000}, now)
    assert big.tier is Tier.ESCALATE and big.confirm == ("to", "amount") and big.approve_reason and not big.trustable
    small = policy.evaluate("pay", {"to": "V-1", "amount": 5}, now)
    assert small.confirm == () and not small.approve_reason and small.trustable
    assert policy.evaluate("wire", {"iban": "DE00"}, now).confirm == ("iban",)
    # A Trust never lets through what asks more than a click: not the tool that asks it, not a rule that fires.
    trusted = PolicyContext(now=0.0, trusted_tools=frozenset({"pay", "wire"}))
    assert policy.evaluate("pay", {"to": "V-1", "amount": 5}, trusted).tier is Tier.AUTO
    assert policy.evaluate("pay", {"to": "V-NEW", "amount": 5}, trusted).confirm == ("to",)
    wire = policy.evaluate("wire", {"iban": "DE00"}, trusted)
    assert wire.tier is Tier.APPROVE and wire.confirm == ("iban",) and not policy.trust_matters("wire")


def test_approving_checks_each_typed_value_and_the_reason() -> None:
    a = make_approval(now=0, args={"to": "V-NEW", "amount": 5000}).model_copy(
        update={"confirm": ("amount", "missing"), "approve_reason_required": True}
    )
    runs = a.execute_args
    ask = confirmation_problem
    assert "needs a reason" in str(ask(a, DecisionKind.APPROVE, typed={"amount": "5000"}, reason=" ", runs_with=runs))
    assert "type its amount" in str(ask(a, DecisionKind.APPROVE, typed=None, reason="ok", runs_with=runs))
    wrong = ask(a, DecisionKind.TRUST, typed={"amount": "500"}, reason="ok", runs_with=runs)
    assert wrong is not None and "not the amount that runs" in wrong
    unreadable = ask(a, DecisionKind.APPROVE, typed={"amount": "5e3"}, reason="ok", runs_with=runs)
    assert unreadable is not None and "not a number as hitl reads one" in unreadable and NUMBER_FORM in unreadable
    assert ask(a, DecisionKind.APPROVE, typed={"amount": "5000"}, reason="ok", runs_with=runs) is None
    edited = {**runs, "amount": 4000}  # a modify confirms the value it will run
    assert ask(a, DecisionKind.MODIFY, typed={"amount": "5000"}, reason="ok", runs_with=edited) is not None
    assert ask(a, DecisionKind.MODIFY, typed={"amount": "4000"}, reason="ok", runs_with=edited) is None
    assert ask(a, DecisionKind.REJECT, typed=None, reason=None, runs_with=runs) is None  # rejecting asks nothing


HANDED = """
requester: agent:riley
roles: {support: [U_S1], finance: [U_F1]}
policy:
  tools:
    pay: {tier: approve, role: support, timeout: 1h, hand_on_after: 50%, backup_role: finance}
    wire: {tier: approve, role: support, timeout: 1h}
  rules:
    - {name: big_wire, tools: [wire], when: "args.amount > 500", tier: escalate, hand_on_after: 10m,
       backup_role: finance}
"""


def test_the_policy_says_when_and_to_whom_an_approval_is_handed_on() -> None:
    from hitl.engine.domain.decide import eligible
    from hitl.engine.domain.models import Reviewer

    policy = parse_config(HANDED).build_policy()
    pay = policy.evaluate("pay", {"amount": 5}, PolicyContext(now=0.0))
    assert pay.hand_on is not None and pay.hand_on.hand_on_at(1000.0, 3600.0) == 2800.0
    assert policy.evaluate("wire", {"amount": 5}, PolicyContext(now=0.0)).hand_on is None
    big = policy.evaluate("wire", {"amount": 900}, PolicyContext(now=0.0)).hand_on
    assert big is not None and big.backup_role == "finance" and big.hand_on_at(0.0, 3600.0) == 600.0
    with pytest.raises(EngineError, match="go together"):
        parse_config(HANDED.replace(", backup_role: finance}", "}", 1))
    a = make_approval(now=0, role="support").model_copy(update={"backup_role": "finance", "hand_on_at": 1800.0})
    backup = Reviewer(id="U_F1", roles=frozenset({"finance"}))
    assert not eligible(a, backup) and not eligible(a, backup, 1799.0) and eligible(a, backup, 1800.0)
    assert not eligible(a.model_copy(update={"requester": "U_F1"}), backup, 1800.0)  # never their own request
