"""What a consequence returned, shaped within its tool's bounds: a sentence or the known parts; anything else a
failed consequence saying what was returned; drawn line by line as arguments are."""

from __future__ import annotations

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.consequences import Consequence, ConsequenceLimits, ConsequenceOutcome, shaped
from hitl.engine.errors import EngineError, PolicyError
from hitl.engine.receipts.claims import receipt_claims
from hitl.testing import make_approval

LIMITS = ConsequenceLimits()


def test_a_sentence_or_a_mapping_of_the_known_parts_is_shown() -> None:
    said = shaped("Refunds 30.00; 170.00 left", LIMITS)
    assert (said.outcome, said.summary, said.lines()) == (
        ConsequenceOutcome.SHOWN,
        "Refunds 30.00; 170.00 left",
        [("Refunds 30.00; 170.00 left", ())],
    )
    full = shaped(
        {
            "summary": "Balance after",
            "changes": {"balance": {"before": 200, "after": "170"}, "state": ["open", "closed"]},
            "table": [{"order": "A1", "refund": 30}],
            "diff": "- 200\n+ 170",
        },
        LIMITS,
    )
    lines = [line for line, _ in full.lines()]
    assert lines == [
        "Balance after",
        'balance: 200 → "170"',
        'state: "open" → "closed"',
        'order: "A1" · refund: 30',
        "- 200",
        "+ 170",
    ]
    assert dict(full.lines())['balance: 200 → "170"'] == ("text, not a number: only its quotes tell it from 170",)


@pytest.mark.parametrize(
    ("returned", "why"),
    [
        (42, "failed: returned int, not a str or a mapping with a summary"),
        (
            {"summary": "x", "sql": "DROP"},
            "failed: returned an unknown part 'sql' (the parts are summary, changes, table, diff)",
        ),
        ({"table": []}, "failed: returned no summary sentence (a non-empty str)"),
        ({"summary": "x", "diff": 3}, "failed: returned a diff of int, not a str"),
        ({"summary": "x", "table": "rows"}, "failed: returned a table of str, not a list of rows (mappings)"),
        ({"summary": "x", "changes": {"a": 1}}, "failed: returned a change 'a' that is not {before, after}"),
        ({"summary": "x", "diff": "y" * 5000}, "failed: returned 5041 bytes, more than its bound of 4096"),
        ({"summary": "x", "table": [{"n": 2**70}]}, "failed: returned a value RFC 8785 cannot encode"),
        ({"summary": "x", "table": [{"n": object()}]}, "failed: returned a value that is not JSON"),
    ],
)
def test_anything_else_is_a_failed_consequence_saying_what(returned: object, why: str) -> None:
    c = shaped(returned, LIMITS)
    assert c.outcome is ConsequenceOutcome.FAILED and c.why.startswith(why), c.why
    assert c.lines() == [(f"No consequence ({c.why})", ())]


def test_rows_past_the_bound_are_cut_and_counted_and_strings_redacted() -> None:
    c = shaped(
        {"summary": "mail ann@example.com", "table": [{"n": i} for i in range(60)]},
        LIMITS,
        redact=lambda t: t.replace("ann@example.com", "[email]"),
    )
    assert (len(c.table), c.rows_cut, c.summary) == (50, 10, "mail [email]")
    assert c.lines()[-1] == ("… and 10 more rows", ())


def test_its_digest_is_of_its_rfc8785_json_and_names_what_was_shown() -> None:
    a, b = shaped({"summary": "x", "table": [{"b": 1, "a": 2.0}]}, LIMITS), shaped("x", LIMITS)
    assert a.digest() == Consequence.model_validate(a.canonical()).digest() and a.digest() != b.digest()
    assert shaped({"summary": "x", "table": [{"a": 2, "b": 1}]}, LIMITS).digest() == a.digest()  # 2.0 is 2


def test_a_bad_reference_or_limit_is_a_config_error_naming_the_tool() -> None:
    def config(line: str) -> str:
        return f"policy:\n  tools:\n    refund:\n      {line}\n"

    with pytest.raises(PolicyError, match="tool 'refund': consequence 'tests.nowhere:f' cannot be imported"):
        parse_config(config('consequence: "tests.nowhere:f"'))
    with pytest.raises(PolicyError, match="module 'tests.consequence_tools' has no 'missing'"):
        parse_config(config('consequence: "tests.consequence_tools:missing"'))
    with pytest.raises(PolicyError, match="is a list, not a function"):
        parse_config(config('consequence: "tests.consequence_tools:RAN"'))
    with pytest.raises(EngineError, match="HITL_RECEIPT_KEY cannot be passed to a consequence"):
        parse_config(config("consequence_limits: {env: [HITL_RECEIPT_KEY]}"))
    with pytest.raises(EngineError, match="policy.tools.refund.consequence"):
        parse_config(config('consequence: "not a reference"'))
    ok = parse_config(config('consequence: "tests.consequence_tools:refund"'))
    assert ok.policy.tools["refund"].consequence_limits == LIMITS


def test_values_nested_too_deep_are_a_failed_consequence() -> None:
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    c = shaped({"summary": "x", "table": [{"n": deep}]}, ConsequenceLimits(max_bytes=65536))
    assert (c.outcome, c.why) == (ConsequenceOutcome.FAILED, "failed: returned values nested too deep")


def test_a_receipt_names_the_consequence_its_approvers_were_shown() -> None:
    a = make_approval(now=0.0, args={"order_id": "A1", "amount": 30})
    c = shaped("Order A1 keeps 170.00 refundable", LIMITS)
    shown = receipt_claims(a.model_copy(update={"consequence": c}), args=a.args, issuer="https://x", now=0, ttl=60)
    assert shown["consequence_sha256"] == c.digest()
    assert "consequence_sha256" not in receipt_claims(a, args=a.args, issuer="https://x", now=0, ttl=60)


def test_a_lone_surrogate_returned_is_a_failed_consequence_not_a_crash() -> None:
    """UTF-8 cannot carry it to a store, Slack or a browser: the approval is asked without the consequence."""
    for returned in ("lone \ud800 surrogate", {"summary": "ok", "table": [{"to": "\udfff"}]}):
        got = shaped(returned, ConsequenceLimits())
        assert got.outcome is ConsequenceOutcome.FAILED and "not JSON" in got.why
