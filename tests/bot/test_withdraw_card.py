"""Withdraw from the card, through `hitl serve` (its API, its store, its receipt key) and signed Slack requests
against the emulated Web API, on SQLite and Redis: a decider withdraws through a form that asks why, the receipt then
fails redeem, and the card says who withdrew it and why; anyone else is told it is not theirs (audited); a
redeem draws the card again with nothing to withdraw, and a form opened before it says the withdrawal lost."""

from __future__ import annotations

import copy
from typing import Any

from hitl.bot.listeners.replies import BAD_VALUE
from hitl.bot.listeners.withdrawals import NOT_YOURS
from hitl.bot.views.withdrawal import ACTION_WITHDRAW
from hitl.sandbox.webapi import Message
from tests.bot.conftest import Harness
from tests.receipts.conftest import AGENT, FIN1, SERVICE, api

REASON = "the vendor's bank details changed *today*"


async def _approved_receipt(h: Harness, key: str, amount: int) -> tuple[str, str]:
    """An approval U_FIN1 approved, claimed for execution: its id and its receipt."""
    proposal = {"session": "ses_w", "tool": "pay", "args": {"to": "V-1", "amount": amount}, "idempotency_key": key}
    pending = await api(h, "POST", "/proposals", AGENT, proposal)
    await h.settle()  # its card posted before it is decided
    shown = await api(h, "GET", f"/approvals/{pending['approval']['id']}", FIN1)
    decision = {
        "decision": "approve",
        "expected_version": shown["version"],
        "action_hash": shown["action_hash"],
        "view_digest": shown["view_digest"],
    }
    await api(h, "POST", f"/approvals/{shown['id']}/decisions", FIN1, decision)
    claim = {"action_hash": pending["approval"]["execute_hash"]}
    receipt = (await api(h, "POST", f"/executions/{pending['execution_key']}/claim", AGENT, claim))["receipt"]
    await h.settle()
    return str(shown["id"]), str(receipt)


def _block(card: Message, prefix: str) -> dict[str, Any] | None:
    return next((b for b in card.blocks if str(b.get("block_id", "")).startswith(prefix)), None)


def assert_withdrawn(card: Message, reason: str) -> None:
    """``card`` drawn again after U_FIN1's withdrawal: it says who withdrew it, shows ``reason`` as inert text, and
    offers Withdraw no more."""
    said = _block(card, "hitl_withdrawn:")
    assert said is not None and said["text"]["text"].startswith(":leftwards_arrow_with_hook: *Withdrawn* by <@U_FIN1>:")
    box = _block(card, "hitl_withdrawn_reason:")
    assert box is not None and box["elements"][0]["elements"] == [{"type": "text", "text": reason}]  # inert text
    assert _block(card, "hitl_withdraw:") is None


async def _open_form(h: Harness, approval_id: str, user: str) -> str | None:
    """``user`` presses the card's Withdraw: the id of the form it opened, or None."""
    views = len(h.state.views)
    await h.slack.click(user, copy.deepcopy(h.card_for(approval_id)), ACTION_WITHDRAW)
    return list(h.state.views)[-1] if len(h.state.views) > views else None


async def _redeem(h: Harness, receipt: str) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {SERVICE}"}
    async with h.http.post(f"{h.bot_url}/api/v1/receipts/redeem", json={"receipt": receipt}, headers=headers) as r:
        return r.status, await r.json()


async def test_a_decider_withdraws_from_the_card_and_the_card_says_who_and_why(paying: Harness) -> None:
    h = paying
    approval_id, receipt = await _approved_receipt(h, "k-card", 21)
    assert _block(h.card_for(approval_id), "hitl_withdraw:") is not None  # offered while unspent

    # Not a decider of it: told it is not theirs, no form, and the refusal is in its trail.
    assert await _open_form(h, approval_id, "U_FIN2") is None
    assert [m.text for m in h.ephemeral("U_FIN2")] == [NOT_YOURS]
    trail = await h.service.store.audit.entries(approval_id=approval_id)
    assert [(e.actor, e.outcome, e.detail) for e in trail if e.event == "refused"] == [
        ("U_FIN2", "not_eligible", "opening the withdraw form")
    ]

    view_id = await _open_form(h, approval_id, "U_FIN1")
    assert view_id is not None and h.state.views[view_id]["callback_id"] == "hitl_withdraw_submit"
    foreign = await h.slack.submit("U_FIN2", view_id, _reason(REASON))  # someone else's form: refused, audited
    assert foreign.json()["response_action"] == "errors"
    empty = await h.slack.submit("U_FIN1", view_id, _reason("   "))
    assert "1 to 500 characters" in _error(empty.json()), empty.json()
    assert await _redeemable(h, receipt)  # neither withdrew anything

    done = await h.slack.submit("U_FIN1", view_id, _reason(REASON))
    assert done.status == 200 and done.json() is None
    status, refused = await _redeem(h, receipt)  # recorded before the form was answered
    assert status == 409 and refused["error"]["code"] == "withdrawn", refused
    trail = await h.service.store.audit.entries(approval_id=approval_id)
    assert [(e.actor, e.detail) for e in trail if e.event == "withdrawn"] == [
        ("U_FIN1", f"withdrawal via slack: {REASON}")
    ]
    assert [(e.actor, e.outcome) for e in trail if e.event == "refused"] == [
        ("U_FIN2", "not_eligible"),
        ("U_FIN2", "foreign_submitter"),
        ("api:payments", "receipt_withdrawn"),  # the redeem after it
    ]

    await h.settle()  # the card drawn again, though the approval has no new version
    assert_withdrawn(h.card_for(approval_id), REASON)


async def test_a_withdrawal_that_loses_to_a_redeem_says_so(paying: Harness) -> None:
    h = paying
    approval_id, receipt = await _approved_receipt(h, "k-lost", 22)
    view_id = await _open_form(h, approval_id, "U_FIN1")
    assert view_id is not None
    assert (await _redeem(h, receipt))[0] == 200  # the protected system spent it while the form was open
    await h.settle()  # the redeem draws the card again (no new version): nothing left to withdraw
    card = h.card_for(approval_id)
    assert _block(card, "hitl_withdraw:") is None and _block(card, "hitl_spent:") is not None

    lost = await h.slack.submit("U_FIN1", view_id, _reason("too late"))
    assert _error(lost.json()) == (
        "Not withdrawn: its receipt was spent first, so the protected system may have acted on it. Undo it there."
    )
    trail = await h.service.store.audit.entries(approval_id=approval_id)
    assert [e.outcome for e in trail if e.event == "refused"] == ["receipt_spent"]
    assert not [e for e in trail if e.event == "withdrawn"]


async def test_an_altered_withdraw_button_opens_nothing_and_is_audited(paying: Harness) -> None:
    h = paying
    approval_id, receipt = await _approved_receipt(h, "k-altered", 23)
    card = copy.deepcopy(h.card_for(approval_id))
    block = _block(card, "hitl_withdraw:")
    assert block is not None
    block["elements"][0]["value"] = f"{approval_id}|1|{'0' * 63}"  # not a hash: altered
    views = len(h.state.views)
    await h.slack.click("U_FIN1", card, ACTION_WITHDRAW)
    assert len(h.state.views) == views and [m.text for m in h.ephemeral("U_FIN1")] == [BAD_VALUE]
    refused = [e for e in await h.service.store.audit.entries(limit=500) if e.event == "refused"]
    assert [(e.actor, e.outcome) for e in refused] == [("U_FIN1", "tampered_button")]
    assert await _redeemable(h, receipt)


def _reason(text: str) -> dict[str, dict[str, dict[str, Any]]]:
    return {"hitl_reason": {"value": {"type": "plain_text_input", "value": text}}}


def _error(answer: Any) -> str:
    """The error a form's answer puts under its reason (the only input of the withdrawal form)."""
    assert answer["response_action"] == "errors" and list(answer["errors"]) == ["hitl_reason"], answer
    return str(answer["errors"]["hitl_reason"])


async def _redeemable(h: Harness, receipt: str) -> bool:
    introspected = await api(h, "POST", "/receipts/introspect", SERVICE, {"receipt": receipt})
    return bool(introspected == {"status": "active"})
