"""The riskiest approvals take attention: an escalated payment's Approve opens a form where the reviewer types the
amount (compared as an exact decimal with the amount that runs) and says why; a wrong amount, a missing reason, a
plain Approve button, ``/hitl approve``, a Trust, a batch or a group decide nothing, and each refusal is audited.
The API takes the typed values and the reason as fields. Over signed Slack requests and the HTTP API, on every
store."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_APPROVE_CONFIRM, ACTION_TRUST
from hitl.engine.domain.confirmation import NUMBER_FORM
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import EngineError, ErrorCode
from tests.api.cli_process import hitl
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

TOKEN = "tok-pay-2"
CONFIG = (
    payments.requested_by_riley(payments="[U_SUPPORT1, U_SUPPORT2]")
    + payments.tool("pay", tier="approve", timeout="1h")
    + payments.TYPED_ESCALATION
    + payments.LARGE_PAYMENTS_ESCALATE
    + payments.api_tokens(token("pay2", TOKEN, "U_SUPPORT2"))
)

h = harness_serving(CONFIG)


async def _pay(h: Harness, amount: int, to: str = "V-1", session: str | None = None) -> Approval:
    return await pay(h, amount, to, session=session)


def _typed(amount: str, reason: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    values = {"hitl_confirm:amount": {"value": {"type": "plain_text_input", "value": amount}}}
    if reason is not None:
        values["hitl_reason"] = {"value": {"type": "plain_text_input", "value": reason}}
    return values


def _forged(card: Any, action: str) -> Any:
    """The card with its Approve… button made into ``action`` (same value: bound to the same approval and view)."""
    forged = copy.deepcopy(card)
    for b in forged.blocks:
        for e in b.get("elements", []):
            if e.get("action_id") == ACTION_APPROVE_CONFIRM:
                e["action_id"] = action
    return forged


async def _refusals(h: Harness, a: Approval) -> list[str]:
    return [e.outcome for e in await h.svc.store.audit.entries(approval_id=a.id) if e.event == "refused"]


async def test_an_escalated_payment_is_approved_only_by_typing_its_amount_and_saying_why(h: Harness) -> None:
    a = await _pay(h, 5000)
    card = h.card_for(a.id)
    buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert [e["action_id"] for e in buttons][:2] == [ACTION_APPROVE_CONFIRM, "hitl_reject"]
    assert buttons[0]["text"]["text"] == "Approve…" and ACTION_TRUST not in {e["action_id"] for e in buttons}

    # A plain Approve (an older card's button, or a forged one) and /hitl approve decide nothing.
    assert (await h.slack.click("U_SUPPORT1", _forged(card, ACTION_APPROVE), ACTION_APPROVE)).status == 200
    assert (await h.slack.command("U_SUPPORT1", "general", f"approve {a.id}")).status == 200
    assert (await h.svc.store.approvals.get(a.id)).status is Status.PENDING
    assert await _refusals(h, a) == ["confirmation_mismatch", "confirmation_mismatch"]

    # Approve… opens the form: an input for the amount (nothing of it filled in) and one for the reason.
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_APPROVE_CONFIRM)).status == 200
    view_id = list(h.state.views)[-1]
    form = h.state.views[view_id]
    inputs = {b["block_id"]: b for b in form["blocks"] if b["type"] == "input"}
    assert set(inputs) == {"hitl_confirm:amount", "hitl_reason"}
    assert "5000" not in str(inputs) and "initial_value" not in str(inputs)

    wrong = await h.slack.submit("U_SUPPORT1", view_id, _typed("500", "the vendor's invoice"))
    assert wrong.json()["response_action"] == "errors"
    assert "not the amount that runs" in wrong.json()["errors"]["hitl_confirm:amount"]
    no_reason = await h.slack.submit("U_SUPPORT1", view_id, _typed("5000"))
    assert no_reason.json()["response_action"] == "errors"
    assert (await h.svc.store.approvals.get(a.id)).version == a.version  # nothing recorded by any of them
    assert await _refusals(h, a) == ["confirmation_mismatch"] * 4

    ok = await h.slack.submit("U_SUPPORT1", view_id, _typed("5,000.00", "invoice 1182 checked with the vendor"))
    assert ok.status == 200 and ok.json() is None
    done = await h.svc.store.approvals.get(a.id)
    assert done.status is Status.APPROVED and done.decisions[-1].reason == "invoice 1182 checked with the vendor"


UNREADABLE = ["10,00", "1,0,0,0", "\uff11\uff10\uff10\uff10", "\u0661\u0660\u0660\u0660", "1e3", "+1000"]
"""Ways to write 1000 that are not the one form hitl reads (ten in many locales, stray commas, fullwidth and
Arabic-Indic digits, an exponent, a sign)."""


async def test_a_typed_amount_is_read_in_one_form_by_the_service_and_the_slack_form(h: Harness) -> None:
    asked = await _pay(h, 1000, to="V-SVC")
    for typed in UNREADABLE:
        with pytest.raises(EngineError) as refused:
            await h.svc.decide(
                DecideRequest(asked.id, "U_SUPPORT1", DecisionKind.APPROVE, reason="checked", confirm={"amount": typed})
            )
        assert refused.value.code is ErrorCode.CONFIRMATION_MISMATCH and NUMBER_FORM in refused.value.message, typed
    await h.svc.decide(
        DecideRequest(asked.id, "U_SUPPORT1", DecisionKind.APPROVE, reason="checked", confirm={"amount": "1,000"})
    )
    assert (await h.svc.store.approvals.get(asked.id)).status is Status.APPROVED

    a = await _pay(h, 1000, to="V-FORM")
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_APPROVE_CONFIRM)).status == 200
    view_id = list(h.state.views)[-1]
    for typed in UNREADABLE:
        answer = (await h.slack.submit("U_SUPPORT1", view_id, _typed(typed, "invoice checked"))).json()
        assert answer["response_action"] == "errors", typed
        assert "not a number as hitl reads one" in answer["errors"]["hitl_confirm:amount"], typed
    assert (await h.svc.store.approvals.get(a.id)).version == a.version
    assert await _refusals(h, a) == ["confirmation_mismatch"] * len(UNREADABLE)
    ok = await h.slack.submit("U_SUPPORT1", view_id, _typed("1000", "invoice checked"))
    assert ok.status == 200 and ok.json() is None
    assert (await h.svc.store.approvals.get(a.id)).status is Status.APPROVED


async def test_the_api_takes_the_typed_amount_and_the_reason_as_fields(h: Harness) -> None:
    a = await _pay(h, 1250, to="V-API")
    url = f"{h.bot_url}/api/v1/approvals/{a.id}/decisions"
    bound = {"decision": "approve", "expected_version": a.version, "action_hash": a.action_hash}

    async def post(**body: Any) -> tuple[int, Any]:
        async with h.http.post(url, json={**bound, **body}, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            return r.status, await r.json(content_type=None)

    shown_status, shown = 0, None
    async with h.http.get(f"{h.bot_url}/api/v1/approvals/{a.id}", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        shown_status, shown = r.status, await r.json()
    assert shown_status == 200 and shown["confirm"] == ["amount"] and shown["approve_reason_required"] is True
    for body in ({}, {"confirm": {"amount": 1250}}, {"confirm": {"amount": "1249.99"}, "reason": "checked"}):
        status, problem = await post(**body)
        assert status == 422 and problem["error"]["code"] == "confirmation_mismatch", problem
    status, approved = await post(confirm={"amount": "1250"}, reason="checked against the invoice")
    assert status == 200 and approved["status"] == "approved"
    assert await _refusals(h, a) == ["confirmation_mismatch"] * 3


async def test_no_trust_batch_or_group_card_gets_around_it(h: Harness) -> None:
    members = [await _pay(h, 900 + i, to=f"V-G{i}", session="ses_flood") for i in range(3)]
    # Each has a card of its own: a group card would let one click decide them all.
    assert len({(h.card_for(a.id).channel, h.card_for(a.id).ts) for a in members}) == 3
    items = [{"to": "V-B", "amount": 600}, {"to": "V-C", "amount": 5}]
    with pytest.raises(EngineError) as batch:
        await h.svc.propose(ProposeRequest("pay", {}, session_id="ses_batch", batch=items))
    assert batch.value.code is ErrorCode.CONFIRMATION_MISMATCH
    trusted = await _pay(h, 5000, to="V-T")
    assert not trusted.trustable
    refused = await h.slack.click("U_SUPPORT1", _forged(h.card_for(trusted.id), ACTION_TRUST), ACTION_TRUST)
    assert refused.status == 200 and (await h.svc.store.approvals.get(trusted.id)).status is Status.PENDING
    assert await _refusals(h, trusted) == ["not_trustable"]
    assert await h.svc.store.trust.all_active(now=h.clock.now()) == []


async def test_the_cli_takes_the_typed_amount_and_the_reason_as_options(h: Harness) -> None:
    a = await _pay(h, 700, to="V-CLI")
    env = {"HITL_API_URL": h.bot_url, "HITL_TOKEN": TOKEN, "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, body, err = await hitl("resume", a.id, "--approve", "--json", env=env)
    assert code == 1 and body["error"]["code"] == "confirmation_mismatch", (body, err)
    code, body, err = await hitl(
        "resume", a.id, "--approve", "--confirm", "amount=70", "--reason", "ok", "--json", env=env
    )
    assert code == 1 and "not the amount that runs" in body["error"]["message"], (body, err)
    code, body, err = await hitl(
        "resume", a.id, "--approve", "--confirm", "amount=700.00", "--reason", "invoice checked", "--json", env=env
    )
    assert code == 0, (body, err)
    assert body["approval"]["status"] == "approved" and body["approval"]["decisions"][0]["reason"] == "invoice checked"
    assert await _refusals(h, a) == ["confirmation_mismatch"] * 2
