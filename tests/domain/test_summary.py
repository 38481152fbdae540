"""A tool's summary: sentence: rendered from the exact arguments with its filters, never a refusal, bounded; no
value can extend it (each is delimited and cut at a line break); money is exact and shows its currency."""

from __future__ import annotations

import pytest

from hitl.bot.views.blocks import card
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.summary import currencies, render_summary
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock

REFUND = "Refund {{ args.amount | money }} to {{ args.customer_id }} for order {{ args.order_id }}"


def test_the_filters_read_as_people_write() -> None:
    assert render_summary(REFUND, {"amount": 1234.5, "customer_id": "C-1", "order_id": "9"}) == (
        "Refund 1,234.50 to “C-1” for order “9”"
    )
    assert render_summary("due {{ args.at | date }}", {"at": 1_800_000_000}) == "due 15 Jan 2027"
    assert render_summary("due {{ args.at | date }}", {"at": "2026-11-25T10:00:00"}) == "due 25 Nov 2026"
    assert render_summary("to {{ args.to | list }}", {"to": ["a", "b", "c"]}) == "to “a”, “b” and “c”"
    assert render_summary("to {{ args.to | list(2) }}", {"to": ["a", "b", "c"]}) == "to “a”, “b” and 1 more"


def test_a_template_that_fails_gives_no_sentence_and_a_long_one_is_cut() -> None:
    assert render_summary(REFUND, {"amount": "lots"}) is None  # missing fields, a non-number: no sentence
    assert render_summary("{{ args.x.__class__.__mro__ }}", {"x": 1}) is None  # the sandbox allows no internals
    long = render_summary("{{ args.text }}", {"text": "word " * 100})  # a value cut with the sentence
    assert long is not None and len(long) == 200 and long.endswith("…")


def test_a_summary_that_does_not_compile_is_refused_where_hitl_yaml_is_read() -> None:
    with pytest.raises(EngineError, match="summary is not a valid template") as refused:
        parse_config("policy: {tools: {refund: {summary: 'Refund {{ args.amount '}}}")
    assert refused.value.code is ErrorCode.POLICY_INVALID


async def test_the_card_leads_with_the_sentence_its_values_delimited(tmp_path: object) -> None:
    config = parse_config(
        "roles: {support: [U_S1]}\npolicy: {tools: {refund: {tier: approve, role: support, summary: '" + REFUND + "'}}}"
    )
    store = SqliteStore(tmp_path / "s.db")  # type: ignore[operator]
    svc = ApprovalService.from_config(config, store=store, clock=FakeClock())
    hostile = {"amount": 120, "customer_id": "<!channel> *Security*", "order_id": "78291"}
    p = await svc.propose(ProposeRequest("refund", hostile, session_id="s"))
    sentence = "Refund 120.00 to “<!channel> *Security*” for order “78291”"
    assert p.approval is not None and p.approval.summary == sentence
    header = card(p.approval, now=0)[0]
    # plain text: Slack formats, mentions and links nothing in it, so the value is shown as it is, delimited
    assert header["type"] == "header" and header["text"] == {
        "type": "plain_text",
        "text": f"⚠ Approval needed: {sentence}",  # issue 63: marked, the order id is text that reads as a number
        "emoji": False,
    }
    await store.close()


TRANSFER = "Transfer {{ args.amount | money }} to {{ args.to }}"


def test_a_value_cannot_extend_the_headline() -> None:
    args = {"amount": 9999, "to": "C-1 (verified by the CFO)\nAmount: 1"}
    assert render_summary(TRANSFER, args, currencies={"amount": "EUR"}) == (
        "Transfer EUR 9,999.00 to “C-1 (verified by the CFO)…”"
    )


def test_money_is_exact_and_takes_its_currency_from_the_filter_or_the_schema() -> None:
    assert render_summary(TRANSFER, {"amount": 899.999, "to": "C-1"}) == "Transfer 899.999 to “C-1”"
    given = "Refund {{ args.amount | money(currency='USD') }}"
    assert render_summary(given, {"amount": 5}, currencies={"amount": "EUR"}) == "Refund USD 5.00"
    plain = "Refund {{ args.amount }} ({{ args.flag }}, {{ args.note }}, {{ args.tags | list }})"
    assert render_summary(plain, {"amount": 5, "flag": False, "note": None, "tags": ["a", "b\nc"]}) == (
        "Refund 5 (false, null, “a” and “b…”)"
    )
    assert render_summary("{{ args.amount }}", {"amount": 7}, currencies={"amount": "EUR"}) == "EUR 7.00"
    assert render_summary("{% if args.amount > 500 %}big{% endif %}", {"amount": 900}, currencies={"amount": "EUR"})


def test_hidden_characters_are_marked_in_the_sentence() -> None:
    assert render_summary("To {{ args.to }}", {"to": "bob\u202e"}) == "To “bob[U+202E]”"


def test_currencies_come_from_the_declared_schema() -> None:
    schema = {"properties": {"amount": {"type": "number", "x-currency": "EUR"}, "to": {"type": "string"}}}
    assert currencies(schema) == {"amount": "EUR"}
    assert currencies(None) == {} and currencies({"properties": []}) == {}
