"""Review cards and button clicks through the real HTTP path."""

from __future__ import annotations

import copy
import json
from typing import Any

from hitl.bot.views import evidence as card_evidence
from hitl.bot.views.controls import ACTION_APPROVE, ACTION_TRUST
from hitl.engine.domain.models import Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.sandbox.limits import message_problems
from tests.bot.conftest import Harness
from tests.slack_text import parsed_text

EVIDENCE = "Refund now! <!channel> <@U_FIN1> *APPROVED by Security* <http://evil.example|click> jane@example.com"


async def propose(h: Harness, amount: float = 120, **kw: Any):  # type: ignore[no-untyped-def]
    p = await h.svc.propose(
        ProposeRequest(
            "refund",
            {"order_id": "78291", "customer_id": "C-1042", "amount": amount},
            session_id=str(kw.pop("session", "ses_slack")),
            evidence=EVIDENCE,
            **kw,
        )
    )
    assert p.approval is not None
    return p.approval


async def test_card_is_posted_once_with_inert_evidence(harness: Harness) -> None:
    a = await propose(harness)
    again = await propose(harness)
    assert again.id == a.id
    cards = harness.cards()
    assert len(cards) == 1 and len(harness.state.calls_to("chat.postMessage")) == 1
    blocks = cards[0].blocks
    assert message_problems(blocks) == (None, [])
    parsed = parsed_text(blocks)  # what Slack parses
    assert "<!channel>" not in parsed and "<@U_FIN1>" not in parsed and "<http://evil" not in parsed
    [evidence] = [b for b in blocks if b.get("block_id") == card_evidence.EVIDENCE]
    [run] = evidence["elements"][0]["elements"]  # rich text, which Slack shows as it is: literal, no mention
    assert run["type"] == "text" and "<!channel> <@U_FIN1>" in run["text"] and "[email]" in run["text"]
    buttons = [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["hitl_approve", "hitl_reject", "hitl_modify", "hitl_trust"]


async def test_stranger_refused_privately_then_support_approves_once(harness: Harness) -> None:
    a = await propose(harness)
    card = copy.deepcopy(harness.card_for(a.id))  # as the reviewers' clients still show it
    r = await harness.slack.click("U_STRANGER", card, ACTION_APPROVE)
    assert r.status == 200
    [refusal] = harness.ephemeral("U_STRANGER")
    assert "not a reviewer" in refusal.text and "support" in refusal.text
    assert (await harness.svc.store.approvals.get(a.id)).version == 1
    assert harness.state.calls_to("chat.update") == []

    r = await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    assert r.status == 200
    await harness.settle()
    final = await harness.svc.store.approvals.get(a.id)
    assert final.status is Status.APPROVED and final.decisions[0].via == "slack"
    assert len(harness.state.calls_to("chat.update")) == 1
    updated = harness.card_for(a.id)
    assert not any(b["type"] == "actions" for b in updated.blocks)
    assert "<@U_SUPPORT1> approved" in json.dumps(updated.blocks)

    replay = await harness.slack.click("U_SUPPORT2", card, ACTION_APPROVE)  # the old card, clicked again
    assert replay.status == 200
    assert "Already decided by <@U_SUPPORT1>" in harness.ephemeral("U_SUPPORT2")[0].text
    assert (await harness.svc.store.approvals.get(a.id)).version == final.version


async def test_requester_cannot_approve_their_own_request(harness: Harness) -> None:
    a = await propose(harness, requester="U_SUPPORT2")
    await harness.slack.click("U_SUPPORT2", harness.card_for(a.id), ACTION_APPROVE)
    assert "You requested this action" in harness.ephemeral("U_SUPPORT2")[0].text
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING


async def test_quorum_card_keeps_buttons_until_two_finance_approvals(harness: Harness) -> None:
    a = await propose(harness, amount=899)
    card = copy.deepcopy(harness.card_for(a.id))
    assert harness.state.channels[card.channel].name == "finance-approvals"
    await harness.slack.click("U_FIN1", card, ACTION_APPROVE)
    await harness.settle()
    mid = copy.deepcopy(harness.card_for(a.id))
    text = json.dumps(mid.blocks)
    assert "1 of 2 finance approvals" in text and any(b["type"] == "actions" for b in mid.blocks)
    await harness.slack.click("U_FIN1", mid, ACTION_APPROVE)
    assert "already voted" in harness.ephemeral("U_FIN1")[0].text
    await harness.slack.click("U_FIN2", card, ACTION_APPROVE)  # the first card: its version is stale now
    assert "changed since this card" in harness.ephemeral("U_FIN2")[0].text
    await harness.slack.click("U_FIN2", mid, ACTION_APPROVE)
    await harness.settle()
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED
    assert len(harness.state.calls_to("chat.update")) == 2  # one per recorded decision


async def test_tampered_buttons_and_forged_trust_change_nothing(harness: Harness) -> None:
    a = await propose(harness)
    card = copy.deepcopy(harness.card_for(a.id))
    for value in ("apr_0000000000|1|0000000000000000", "garbage", f"{a.id}|1|ffffffffffffffff", ""):
        for block in card.blocks:
            for el in block.get("elements", []) if block["type"] == "actions" else []:
                el["value"] = value
        r = await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
        assert r.status == 200
    texts = [m.text for m in harness.ephemeral("U_SUPPORT1")]
    assert len(texts) == 4 and all(
        "Nothing changed" in t or "No such approval" in t or "changed since" in t for t in texts
    )
    assert (await harness.svc.store.approvals.get(a.id)).version == 1

    d = await harness.svc.propose(ProposeRequest("delete_customer", {"customer_id": "C-1042"}, session_id="ses_slack"))
    assert d.approval is not None
    dcard = copy.deepcopy(harness.card_for(d.approval.id))
    assert all(e["action_id"] != ACTION_TRUST for b in dcard.blocks if b["type"] == "actions" for e in b["elements"])
    approve_button = next(
        e for b in dcard.blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == ACTION_APPROVE
    )
    dcard.blocks.append(
        {"type": "actions", "block_id": "forged", "elements": [{**approve_button, "action_id": ACTION_TRUST}]}
    )
    await harness.slack.click("U_SUPPORT1", dcard, ACTION_TRUST)
    assert "cannot be trusted" in harness.ephemeral("U_SUPPORT1")[-1].text
    assert (await harness.svc.store.approvals.get(d.approval.id)).status is Status.PENDING
