"""Modify / Reject / Feedback modals and /hitl commands through the real HTTP path."""

from __future__ import annotations

import copy
import json
from typing import Any

from hitl.bot.views.controls import ACTION_MODIFY, ACTION_REJECT, ACTION_TRUST
from hitl.engine.domain.decide import NO_VIEW
from hitl.engine.domain.models import Status, Tier
from hitl.engine.domain.presentation import digest_of
from hitl.engine.domain.requests import ProposeRequest
from hitl.sandbox.webapi import Message
from tests.bot.conftest import Harness
from tests.slack_text import parsed_text


async def propose(h: Harness, amount: float = 120, session: str = "ses_m") -> Any:
    p = await h.svc.propose(
        ProposeRequest(
            "refund",
            {"order_id": "78291", "customer_id": "C-1042", "amount": amount, "reason": "damaged"},
            session_id=session,
        )
    )
    assert p.approval is not None
    return p.approval


def last_view(h: Harness) -> tuple[str, dict[str, Any]]:
    view_id = list(h.state.views)[-1]
    return view_id, h.state.views[view_id]


def field_values(view: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """What Slack would send back for the modal's inputs (initial values, with overrides)."""
    out: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        name = block["block_id"].split(":", 1)[1] if ":" in block["block_id"] else block["block_id"]
        el = block["element"]
        value = overrides.get(name, el.get("initial_value"))
        if el["type"] == "number_input":
            cell = {"type": "number_input", "value": None if value is None else str(value)}
        else:
            cell = {"type": el["type"], "value": value}
        out[block["block_id"]] = {"value": cell}
    return out


async def decided_on_the_cards_view(harness: Harness, approval_id: str, card: Message) -> None:
    """The decision a form made names the view the card that opened it drew, and its audit entry keeps that view."""
    controls = [b for b in card.blocks if str(b.get("block_id", "")).startswith("hitl_actions:")]
    [drawn] = {e["value"].split("|")[3] for b in controls for e in b["elements"]}
    [entry] = [e for e in await harness.svc.store.audit.entries(approval_id=approval_id) if e.event == "decided"]
    assert entry.view_digest == drawn and entry.view is not None and digest_of(entry.view) == drawn


async def test_modify_modal_is_typed_validates_inline_and_reruns_policy(harness: Harness) -> None:
    a = await propose(harness)
    card = copy.deepcopy(harness.card_for(a.id))
    r = await harness.slack.click("U_SUPPORT1", card, ACTION_MODIFY)
    assert r.status == 200
    view_id, view = last_view(harness)
    kinds = {b["block_id"]: b["element"]["type"] for b in view["blocks"] if b["type"] == "input"}
    assert kinds["hitl_field:amount"] == "number_input" and kinds["hitl_field:order_id"] == "plain_text_input"
    assert (
        next(b for b in view["blocks"] if b.get("block_id") == "hitl_field:amount")["element"]["initial_value"] == "120"
    )

    bad = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=-5))
    assert bad.status == 200 and bad.json()["response_action"] == "errors"
    assert "hitl_field:amount" in bad.json()["errors"]
    assert (await harness.svc.store.approvals.get(a.id)).version == 1

    tampered = copy.deepcopy(view)
    signed = tampered["private_metadata"]
    flipped = signed[:-1] + ("1" if signed.endswith("0") else "0")  # always a change (was a no-op 1 time in 256)
    harness.state.views[view_id] = {**tampered, "private_metadata": flipped}
    forged = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=80))
    assert forged.json()["response_action"] == "errors" and "altered" in json.dumps(forged.json())
    harness.state.views[view_id] = view
    other_user = await harness.slack.submit("U_SUPPORT2", view_id, field_values(view, amount=80))
    assert other_user.json()["response_action"] == "errors"

    ok = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=80))
    assert ok.status == 200 and ok.body.strip() == ""
    await harness.settle()
    done = await harness.svc.store.approvals.get(a.id)
    assert done.status is Status.APPROVED and done.execute_args["amount"] == 80
    text = json.dumps(harness.card_for(a.id).blocks, ensure_ascii=False)
    assert "before → after" in text and "80" in text
    await decided_on_the_cards_view(harness, a.id, card)


async def test_modify_without_a_schema_is_one_json_editor(harness: Harness) -> None:
    """An approval with no schema snapshot and none in hitl.yaml (made by an older hitl): the form is not guessed
    from the values and no workflow is loaded to find one; the reviewer edits the argument object as JSON."""
    p = await harness.svc.propose(ProposeRequest("delete_customer", {"customer_id": "C-2001"}, session_id="ses_json"))
    a = p.approval
    assert a is not None and a.args_schema is None
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_MODIFY)
    view_id, view = last_view(harness)
    [editor] = [b for b in view["blocks"] if b["type"] == "input"]
    assert editor["block_id"] == "hitl_args" and json.loads(editor["element"]["initial_value"]) == a.args
    bad = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, hitl_args="customer C-2"))
    assert bad.json()["response_action"] == "errors" and "JSON object" in bad.json()["errors"]["hitl_args"]
    ok = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, hitl_args='{"customer_id": "C-2"}'))
    assert ok.status == 200 and ok.body.strip() == ""
    await harness.settle()
    assert (await harness.svc.store.approvals.get(a.id)).execute_args == {"customer_id": "C-2"}


async def test_modify_to_a_higher_tier_supersedes_with_a_finance_card(harness: Harness) -> None:
    a = await propose(harness, amount=100, session="ses_up")
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_MODIFY)
    view_id, view = last_view(harness)
    r = await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=900))
    assert r.status == 200
    await harness.settle()
    old = await harness.svc.store.approvals.get(a.id)
    assert old.status is Status.SUPERSEDED and old.superseded_by
    new = await harness.svc.store.approvals.get(old.superseded_by)
    assert (new.tier, new.required_role, new.quorum) == (Tier.ESCALATE, "finance", 2)
    assert [m.text for m in harness.cards("finance-approvals")] == [f"Approval needed: refund ({new.id})"]
    assert f"edited it; the edit needs other approvers and went on as {new.id}" in json.dumps(
        harness.card_for(a.id).blocks
    )


async def test_reject_asks_for_a_reason_and_expired_triggers_fail(harness: Harness) -> None:
    a = await propose(harness, session="ses_rej")
    card = copy.deepcopy(harness.card_for(a.id))
    reject = next(
        e for b in card.blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == ACTION_REJECT
    )
    assert reject["style"] == "danger" and reject["confirm"]["title"]["text"] == "Reject this action?"
    await harness.slack.click("U_SUPPORT2", card, ACTION_REJECT)
    view_id, view = last_view(harness)
    assert view["callback_id"] == "hitl_reject_submit"
    r = await harness.slack.submit(
        "U_SUPPORT2",
        view_id,
        {"hitl_reason": {"value": {"type": "plain_text_input", "value": "Customer <!here> already refunded"}}},
    )
    assert r.status == 200
    await harness.settle()
    done = await harness.svc.store.approvals.get(a.id)
    assert done.status is Status.REJECTED and done.reason == "Customer <!here> already refunded"
    blocks = harness.card_for(a.id).blocks  # the reason in a box of its own, as written; no mrkdwn carries it
    [reason] = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_reason:")]
    assert reason["elements"][0]["elements"][0]["text"] == "Customer <!here> already refunded"
    assert "<!here>" not in parsed_text(blocks)
    await decided_on_the_cards_view(harness, a.id, card)

    b = await propose(harness, amount=33, session="ses_rej2")
    harness.state.clock = lambda: 10**10  # every trigger handed out so far is long expired
    card_b = copy.deepcopy(harness.card_for(b.id))
    trigger = harness.state.new_trigger("U_SUPPORT1")
    harness.state.triggers[trigger] = (0.0, "U_SUPPORT1")
    harness.state.clock = __import__("time").time
    # a stale trigger: Slack answers expired_trigger_id and the user is told to click again
    harness.state.new_trigger = lambda user: trigger  # type: ignore[method-assign]
    await harness.slack.click("U_SUPPORT1", card_b, ACTION_REJECT)
    assert harness.state.calls_to("views.open")[-1].response["error"] == "expired_trigger_id"
    assert "Click again" in harness.ephemeral("U_SUPPORT1")[-1].text


async def test_trust_button_and_trust_commands(harness: Harness) -> None:
    a = await propose(harness, session="ses_trust")
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_TRUST)
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED
    assert (
        await harness.svc.propose(
            ProposeRequest("refund", {"order_id": "1", "customer_id": "C-9", "amount": 5}, session_id="ses_trust")
        )
    ).may_run
    await harness.slack.command("U_SUPPORT2", "general", "trust list")
    assert "`refund` for `agent:riley` in `ses_trust`" in harness.ephemeral("U_SUPPORT2")[-1].text
    await harness.slack.command("U_STRANGER", "general", "trust list")  # not a reviewer of refunds: nothing listed
    assert harness.ephemeral("U_STRANGER")[-1].text == "No tool you review is trusted right now."
    await harness.slack.command("U_STRANGER", "general", "trust revoke refund")
    assert "Only reviewers" in harness.ephemeral("U_STRANGER")[-1].text
    await harness.slack.command("U_SUPPORT2", "general", "trust revoke refund")
    assert "no longer trusted in 1 session" in harness.ephemeral("U_SUPPORT2")[-1].text
    assert not (
        await harness.svc.propose(
            ProposeRequest("refund", {"order_id": "1", "customer_id": "C-9", "amount": 6}, session_id="ses_trust")
        )
    ).may_run


async def test_slash_commands(harness: Harness) -> None:
    a = await propose(harness, session="ses_cmd")
    b = await propose(harness, amount=700, session="ses_cmd2")
    r = await harness.slack.command("U_SUPPORT1", "general", "pending")
    assert r.status == 200
    reply = harness.ephemeral("U_SUPPORT1")[-1]
    assert a.id in json.dumps(reply.blocks) and b.id not in json.dumps(reply.blocks)
    await harness.slack.command("U_FIN1", "general", "pending")
    assert b.id in json.dumps(harness.ephemeral("U_FIN1")[-1].blocks)
    await harness.slack.command("U_STRANGER", "general", "pending")
    assert "not a reviewer" in harness.ephemeral("U_STRANGER")[-1].text

    await harness.slack.command("U_STRANGER", "general", f"approve {a.id}")
    assert "not a reviewer" in harness.ephemeral("U_STRANGER")[-1].text
    await harness.slack.command("U_SUPPORT1", "general", f"approve {a.id}")
    assert "is now *approved*" in harness.ephemeral("U_SUPPORT1")[-1].text
    await harness.slack.command("U_FIN1", "general", f'reject {b.id} "too much" for now')
    done = await harness.svc.store.approvals.get(b.id)
    assert done.status is Status.REJECTED and done.reason == "too much for now"
    for decided in (a.id, b.id):  # a command shows no view: its entry says so
        [entry] = [e for e in await harness.svc.store.audit.entries(approval_id=decided) if e.event == "decided"]
        assert entry.view is None and entry.detail.endswith(NO_VIEW)
    await harness.slack.command("U_SUPPORT2", "general", f"show {a.id}")
    assert "Approved" in json.dumps(harness.ephemeral("U_SUPPORT2")[-1].blocks)
    for text, expected in (
        ("approve apr_NOPE000000", "No such approval"),
        ("frobnicate", "Unknown command"),
        ("", "/hitl pending"),
        ("help", "/hitl approve <id>"),
        ("approve", "needs an approval id"),
    ):
        await harness.slack.command("U_SUPPORT2", "general", text)
        assert expected in harness.ephemeral("U_SUPPORT2")[-1].text, text


def test_the_help_lists_each_command_on_a_line_of_its_own() -> None:
    from hitl.bot.listeners.commands import USAGE

    lines = USAGE.split("\n")
    assert lines[0].startswith("*hitl*") and all(line.startswith("• `/hitl ") for line in lines[1:])
    assert all(line.count("`/hitl ") == 1 for line in lines[1:])  # no two commands run together
