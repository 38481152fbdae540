"""Every form answers every wrong field at once, each under its own input (``response_action: errors`` keyed by
block id), worded for a reviewer, never in ``hitl.yaml``'s syntax; the engine still refuses and audits each such
submission. The typed-confirmation form restates the card's headline and the marks of what it asks for. Through
signed view submissions to the bot, on every store."""

from __future__ import annotations

import copy
import json
from typing import Any

from hitl.bot.views.controls import ACTION_APPROVE_CONFIRM, ACTION_MODIFY, ACTION_REJECT
from hitl.bot.views.group_cards import ACTION_GROUP_REJECT
from hitl.engine.domain.models import Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.runtime.compose import compose
from tests.bot import payments
from tests.bot.conftest import CONFIG as REFUND_CONFIG
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay
from tests.bot.test_modals_and_commands import field_values, last_view

CONFIG = (
    payments.requested_by_riley(payments="[U_SUPPORT1, U_SUPPORT2]")
    + payments.tool("pay", tier="approve", timeout="1h", summary=payments.PAY_SUMMARY)
    + payments.TYPED_ESCALATION
    + payments.LARGE_PAYMENTS_ESCALATE
)
CONFIGURATION_WORDS = ("approve_reason", "required)", "confirm:", "--reason", "reason field")
"""What a reviewer must never read in a form error: hitl.yaml's keys, the CLI's options."""

h = harness_serving(CONFIG)


def _text(value: str | None) -> dict[str, Any]:
    return {"value": {"type": "plain_text_input", "value": value}}


def _plain(errors: dict[str, str]) -> None:
    for message in errors.values():
        assert not any(word in message for word in CONFIGURATION_WORDS), message


async def _refusals(h: Harness, approval_id: str) -> list[str]:
    return [e.outcome for e in await h.svc.store.audit.entries(approval_id=approval_id) if e.event == "refused"]


async def test_the_typed_confirmation_form_names_every_wrong_field_under_its_own_input(h: Harness) -> None:
    a = await pay(h, 5000, "p\u0430ypal.com")  # a Cyrillic а
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_APPROVE_CONFIRM)).status == 200
    view_id, form = last_view(h)

    # The headline again, and the marks of what it asks for (type, currency) and of the look-alike payee.
    assert form["blocks"][0]["type"] == "header" and form["blocks"][0]["text"]["text"].startswith(
        "Approval needed: Pay USD 5,000.00 to"
    )
    [marks] = [b for b in form["blocks"] if b.get("block_id") == "hitl_marks"]
    drawn = json.dumps(marks, ensure_ascii=False)
    assert "amount" in drawn and "number, USD" in drawn
    assert "mixes Latin and Cyrillic" in drawn and "p\u0430ypal.com" in drawn

    both = await h.slack.submit("U_SUPPORT1", view_id, {"hitl_confirm:amount": _text("500"), "hitl_reason": _text("")})
    answer = both.json()
    assert answer["response_action"] == "errors" and set(answer["errors"]) == {"hitl_confirm:amount", "hitl_reason"}
    assert "not the amount that runs" in answer["errors"]["hitl_confirm:amount"]
    assert answer["errors"]["hitl_reason"] == "A reason is needed to approve this pay request: say why you approve it."
    _plain(answer["errors"])

    unreadable = await h.slack.submit("U_SUPPORT1", view_id, {"hitl_confirm:amount": _text("5.000,00")})
    errors = unreadable.json()["errors"]
    assert set(errors) == {"hitl_confirm:amount", "hitl_reason"} and "not a number as hitl reads one" in str(errors)
    _plain(errors)
    assert (await h.svc.store.approvals.get(a.id)).status is Status.PENDING
    assert await _refusals(h, a.id) == ["confirmation_mismatch"] * 2  # each still refused and audited by the engine


async def test_the_modify_form_names_the_wrong_edit_the_missing_value_and_the_missing_reason(h: Harness) -> None:
    a = await pay(h, 900, "V-M")
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_MODIFY)).status == 200
    view_id, view = last_view(h)
    values = field_values(view, to="V-" + "x" * 40, hitl_reason="", amount=800)
    values["hitl_confirm:amount"] = _text("")
    answer = (await h.slack.submit("U_SUPPORT1", view_id, values)).json()
    assert answer["response_action"] == "errors"
    assert set(answer["errors"]) == {"hitl_field:to", "hitl_confirm:amount", "hitl_reason"}, answer
    assert answer["errors"]["hitl_confirm:amount"].startswith("Type the amount you read on the card")
    _plain(answer["errors"])

    values = field_values(view, amount=800, hitl_reason="")
    values["hitl_confirm:amount"] = _text("900")  # the amount before the edit: not what would run
    answer = (await h.slack.submit("U_SUPPORT1", view_id, values)).json()
    assert set(answer["errors"]) == {"hitl_confirm:amount", "hitl_reason"}, answer
    assert "not the amount that runs" in answer["errors"]["hitl_confirm:amount"]
    _plain(answer["errors"])
    assert (await h.svc.store.approvals.get(a.id)).status is Status.PENDING


async def test_a_reject_form_without_its_required_reason_says_so_in_a_reviewers_words(harness: Harness) -> None:
    p = await harness.svc.propose(ProposeRequest("delete_customer", {"customer_id": "C-7"}, session_id="ses_del"))
    a = p.approval
    assert a is not None
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_REJECT)
    view_id, _ = last_view(harness)
    answer = (await harness.slack.submit("U_SUPPORT1", view_id, {"hitl_reason": _text("")})).json()
    why = "A reason is needed to reject this delete_customer request: say why it should not run."
    assert answer == {"response_action": "errors", "errors": {"hitl_reason": why}}
    assert "invalid_input" in await _refusals(harness, a.id)  # the engine refused it, and the refusal is audited


async def test_reject_all_without_a_required_reason_keeps_the_form_open_and_says_why(harness: Harness) -> None:
    agent = compose(store=harness.rt.store, clock=harness.clock, config_path=str(REFUND_CONFIG)).service
    ids = []
    for i in range(3):
        args = {"customer_id": f"C-D{i}"}
        proposed = await agent.propose(ProposeRequest("delete_customer", args, session_id="ses_dels"))
        assert proposed.approval is not None
        ids.append(proposed.approval.id)
    await harness.rt.ctx.notifier.sweep()
    await harness.settle()
    [card] = [m for m in harness.cards() if " × delete_customer from " in m.text]
    assert (await harness.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_REJECT)).status == 200
    view_id, _ = last_view(harness)
    answer = (await harness.slack.submit("U_SUPPORT1", view_id, {"hitl_reason": _text(" ")})).json()
    assert answer == {
        "response_action": "errors",
        "errors": {"hitl_reason": "A reason is needed to reject these 3 requests: say why they should not run."},
    }
    await harness.settle()
    assert [(await harness.svc.store.approvals.get(i)).status for i in ids] == [Status.PENDING] * 3
