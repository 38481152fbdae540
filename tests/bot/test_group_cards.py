"""Group cards through signed Slack requests, on every store: like approvals queued together go on one card, which
decides them together (bound to the group's digest) or one by one (each member's own card, one click away); a
group that changed is refused whole, and a member that moves meanwhile is refused alone and shown again."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_APPROVE_CONFIRM
from hitl.bot.views.group_cards import (
    ACTION_GROUP_APPROVE,
    ACTION_GROUP_OPEN,
    ACTION_GROUP_PAGE,
    ACTION_GROUP_REJECT,
    ACTION_GROUP_VIEW,
)
from hitl.engine.domain.grouping import in_order
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.runtime.compose import compose
from hitl.engine.runtime.lifecycle import Decided
from hitl.sandbox.webapi import Message
from hitl.testing import make_approval
from tests.bot.conftest import CONFIG, Harness

REASON = {"hitl_reason": {"value": {"type": "plain_text_input", "value": "duplicate refunds"}}}


async def flood(h: Harness, n: int, *, amount: int = 20, tag: str = "g") -> list[Approval]:
    """``n`` like approvals an agent process (no Slack) created, then carded by one sweep: queued together."""
    agent = compose(store=h.rt.store, clock=h.clock, config_path=str(CONFIG)).service
    out = []
    for i in range(n):
        args = {"order_id": f"{tag}{i}", "customer_id": f"C-{tag}{i}", "amount": amount + i}  # no rolling sum
        p = await agent.propose(ProposeRequest("refund", args, session_id="ses_flood", requester="agent:riley"))
        assert p.approval is not None
        out.append(p.approval)
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    return out


def group_message(h: Harness, channel: str = "refund-approvals") -> Message:
    [found] = [m for m in h.cards(channel) if " × refund from " in m.text]
    return found


def buttons(m: Message | dict[str, Any]) -> list[str]:
    blocks = m.blocks if isinstance(m, Message) else m.get("blocks") or []
    return [e["action_id"] for b in blocks if b.get("type") == "actions" for e in b["elements"]]


def valued(card: Message, value: str) -> Message:
    """A copy of ``card`` whose group buttons all carry ``value`` (a forged click)."""
    forged = copy.deepcopy(card)
    for block in forged.blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            element["value"] = value
    return forged


async def statuses(h: Harness, ids: list[str]) -> list[Status]:
    return [(await h.rt.store.approvals.get(i)).status for i in ids]


async def test_a_flood_goes_on_one_card_and_approve_all_decides_every_member(harness: Harness) -> None:
    h = harness
    members = await flood(h, 7)
    card = group_message(h)
    assert card.text == "7 × refund from agent:riley: 7 of 7 need approval"
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "Approval needed: 7 × refund" in shown
    assert "*amount*: total `161` USD over 7 · each from `20` to `26`" in shown  # the amounts: exact total and range
    assert buttons(card) == [ACTION_GROUP_APPROVE, ACTION_GROUP_REJECT, ACTION_GROUP_VIEW]
    assert sum(1 for b in card.blocks if str(b.get("block_id", "")).startswith("hitl_member:")) == 5  # the first few
    assert "and 2 more" in shown
    for a in members:  # every member is on this message, for updates, reminders and links
        assert await h.rt.store.messages.get(a.id) == await h.rt.store.messages.get(members[0].id)

    updates_before = len(h.state.calls_to("chat.update"))
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert await statuses(h, [a.id for a in members]) == [Status.APPROVED] * 7
    assert h.ephemeral("U_SUPPORT1")[-1].text.startswith(":white_check_mark: Approved 7 of 7.")
    for a in members:
        entries = await h.rt.store.audit.entries(approval_id=a.id)
        [decided] = [e for e in entries if e.event == "decided"]
        assert decided.actor == "U_SUPPORT1" and "via slack:group:" in (decided.detail or "")
    card = group_message(h)  # one message, brought up to date once or twice, not once per member
    assert card.text == "7 × refund from agent:riley: 7 approved" and buttons(card) == []
    assert len(h.state.calls_to("chat.update")) - updates_before < len(members)


async def test_a_click_on_a_group_that_changed_is_refused_whole(harness: Harness) -> None:
    h = harness
    members = await flood(h, 4)
    old = copy.deepcopy(group_message(h))
    await h.slack.command("U_SUPPORT2", "general", f"reject {members[1].id} not this one")
    await h.settle()
    assert (await h.slack.click("U_SUPPORT1", old, ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert "This group changed since its card was drawn" in h.ephemeral("U_SUPPORT1")[-1].text
    assert await statuses(h, [a.id for a in members]) == [
        Status.PENDING,
        Status.REJECTED,
        Status.PENDING,
        Status.PENDING,
    ]
    entries = await h.rt.store.audit.entries(approval_id=min(a.id for a in members))
    assert any(e.event == "refused" and e.outcome == "stale_version" and e.actor == "U_SUPPORT1" for e in entries)
    fresh = group_message(h)  # drawn again: three pending, its buttons bound to them
    assert fresh.text == "4 × refund from agent:riley: 3 of 4 need approval"
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(fresh), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert await statuses(h, [a.id for a in members]) == [
        Status.APPROVED,
        Status.REJECTED,
        Status.APPROVED,
        Status.APPROVED,
    ]


async def test_a_member_that_moves_meanwhile_is_refused_alone_and_shown_again(harness: Harness) -> None:
    """Escalated refunds (two finance approvers each): while U_FIN1's Approve all is being recorded, U_FIN2 votes on
    one member. That member's version moved: U_FIN1's vote on it is refused alone, the others take it, and the card
    shows the member again, still pending."""
    h = harness
    members = await flood(h, 3, amount=900)
    card = group_message(h, "finance-approvals")
    moved = members[1]
    lifecycle = h.rt.ctx.lifecycle
    decide = lifecycle.decide

    async def racing(request: DecideRequest, **kwargs: Any) -> Decided:
        if request.approval_id == moved.id and request.reviewer_id == "U_FIN1":  # another reviewer, just before
            await decide(DecideRequest(moved.id, "U_FIN2", DecisionKind.APPROVE, via="slack"))
        return await decide(request, **kwargs)

    lifecycle.decide = racing  # type: ignore[method-assign]
    try:
        assert (await h.slack.click("U_FIN1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
        await h.settle()
    finally:
        lifecycle.decide = decide  # type: ignore[method-assign]
    told = h.ephemeral("U_FIN1")[-1].text
    assert told.startswith(":ballot_box_with_check: Voted on 2 of 3, not approved yet:")
    assert "1 were not: they changed meanwhile (stale_version)" in told and "Approved" not in told
    voters = [(await h.rt.store.approvals.get(a.id)).approvers for a in members]
    assert voters == [("U_FIN1",), ("U_FIN2",), ("U_FIN1",)]
    again = group_message(h, "finance-approvals")
    assert again.text == (  # a second each
        "3 × refund from agent:riley: 3 of 3 need approval: 3 voted on, each still needs 1 more finance vote"
    )
    assert moved.id in json.dumps(again.blocks)


async def test_a_group_vote_short_of_quorum_says_each_member_still_needs_a_vote(harness: Harness) -> None:
    """Escalated refunds (two finance approvers each): U_FIN1's Approve all records a vote on every member and
    approves none, and both the reply and the card say so; U_FIN2's Approve all then approves all four, and the
    reply counts exactly the members it moved."""
    h = harness
    members = await flood(h, 4, amount=900)
    ids = [a.id for a in members]
    card = group_message(h, "finance-approvals")
    assert (await h.slack.click("U_FIN1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert await statuses(h, ids) == [Status.PENDING] * 4
    assert [(await h.rt.store.approvals.get(i)).approvers for i in ids] == [("U_FIN1",)] * 4
    told = h.ephemeral("U_FIN1")[-1].text
    assert told == ":ballot_box_with_check: Voted on 4 of 4, not approved yet: each still needs 1 more finance vote."
    card = group_message(h, "finance-approvals")
    still = "4 voted on, each still needs 1 more finance vote"
    assert card.text == f"4 × refund from agent:riley: 4 of 4 need approval: {still}"
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "4 pending · 4 voted on, not approved yet: each still needs 1 more finance vote" in shown
    assert "approved" not in card.text.replace("not approved yet", "")
    assert (await h.slack.click("U_FIN2", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert await statuses(h, ids) == [Status.APPROVED] * 4
    assert h.ephemeral("U_FIN2")[-1].text == ":white_check_mark: Approved 4 of 4."
    assert group_message(h, "finance-approvals").text == "4 × refund from agent:riley: 4 approved"


async def test_one_member_is_decided_from_its_own_card_one_click_away(harness: Harness) -> None:
    h = harness
    members = await flood(h, 3)
    card = group_message(h)
    first, *others = in_order(members)  # the card lists them oldest first; Open on the first line
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_OPEN, value=None)).status == 200
    await h.settle()
    [own] = h.ephemeral("U_SUPPORT1")  # the member's own card, for the clicker alone, every control on it
    assert own.text.endswith(f"({first.id})") and ACTION_APPROVE in buttons(own)
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(own), ACTION_APPROVE)).status == 200
    await h.settle()
    assert await statuses(h, [first.id, *(a.id for a in others)]) == [Status.APPROVED, Status.PENDING, Status.PENDING]
    [decided] = [e for e in await h.rt.store.audit.entries(approval_id=first.id) if e.event == "decided"]
    assert decided.view_digest is not None  # decided on its own card's view, which the audit keeps
    assert group_message(h).text == "3 × refund from agent:riley: 2 of 3 need approval"


async def test_view_all_pages_through_every_pending_member(sqlite_harness: Harness) -> None:
    h = sqlite_harness
    members = await flood(h, 25)
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(group_message(h)), ACTION_GROUP_VIEW)).status == 200
    await h.settle()
    view_id = list(h.state.views)[-1]
    listed: list[str] = []
    for page in (1, 2):
        view = h.state.views[view_id]
        assert f"page {page} of 2" in json.dumps(view["blocks"])
        listed += [
            b["block_id"].split(":", 1)[1] for b in view["blocks"] if b.get("block_id", "").startswith("hitl_member:")
        ]
        if page == 1:  # Next (the first page has no Previous)
            assert (await h.slack.click_in_view("U_SUPPORT1", view_id, ACTION_GROUP_PAGE, value=None)).status == 200
            await h.settle()
    assert listed == [a.id for a in in_order(members)]  # every one, oldest first, in two pages


async def test_reject_all_asks_why_and_rejects_every_member(harness: Harness) -> None:
    h = harness
    members = await flood(h, 3)
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(group_message(h)), ACTION_GROUP_REJECT)).status == 200
    await h.settle()
    view_id = list(h.state.views)[-1]
    assert h.state.views[view_id]["submit"]["text"] == "Reject 3"
    assert (await h.slack.submit("U_SUPPORT1", view_id, REASON)).status == 200
    await h.settle()
    for a in members:
        got = await h.rt.store.approvals.get(a.id)
        assert (got.status, got.reason) == (Status.REJECTED, "duplicate refunds")
    assert h.ephemeral("U_SUPPORT1")[-1].text.startswith(":white_check_mark: Rejected 3 of 3.")
    # Someone else submitting the form opened for U_SUPPORT1 decides nothing, and is audited.


async def test_the_requester_and_strangers_cannot_decide_a_group(harness: Harness) -> None:
    h = harness
    members = await flood(h, 3)
    card = group_message(h)
    assert (await h.slack.click("U_RANDOM", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert "You are not a reviewer for this request" in h.ephemeral("U_RANDOM")[-1].text
    assert await statuses(h, [a.id for a in members]) == [Status.PENDING] * 3


async def test_two_like_approvals_get_a_card_each_and_other_kinds_never_group(
    sqlite_harness: Harness, tmp_path: Path
) -> None:
    h = sqlite_harness
    await flood(h, 2)
    assert not [m for m in h.cards() if " × refund from " in m.text]  # two: a card each
    await flood(h, 3, amount=20, tag="s")
    await flood(h, 3, amount=900, tag="b")  # escalated: another tier, role and quorum, so never with the small ones
    assert group_message(h).text.startswith("3 × refund")
    big = group_message(h, "finance-approvals")
    assert big.text.startswith("3 × refund") and "· 2 each" in json.dumps(big.blocks, ensure_ascii=False)


async def test_an_altered_group_button_or_a_foreign_reject_all_form_decides_nothing(sqlite_harness: Harness) -> None:
    h = sqlite_harness
    members = await flood(h, 3)
    card = group_message(h)
    leader = min(a.id for a in members)
    forged = valued(card, f"{leader}|{'0' * 64}")
    assert (await h.slack.click("U_SUPPORT2", forged, ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert "This group changed" in h.ephemeral("U_SUPPORT2")[-1].text
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_REJECT)).status == 200
    await h.settle()
    view_id = list(h.state.views)[-1]
    assert (await h.slack.submit("U_SUPPORT2", view_id, REASON)).status == 200  # not the person it was opened for
    await h.settle()
    nowhere = valued(card, f"apr_0000000000|{'0' * 64}")  # well-formed, naming an approval on no group card
    assert (await h.slack.click("U_SUPPORT2", nowhere, ACTION_GROUP_REJECT)).status == 200
    await h.settle()
    assert "This button is not valid" in h.ephemeral("U_SUPPORT2")[-1].text
    refused = [e for e in await h.rt.store.audit.entries() if e.event == "refused"]
    assert [(e.actor, e.outcome) for e in refused][-3:] == [
        ("U_SUPPORT2", "stale_version"),
        ("U_SUPPORT2", "form_tampered"),
        ("U_SUPPORT2", "tampered_button"),
    ]
    assert await statuses(h, [a.id for a in members]) == [Status.PENDING] * 3


async def test_a_group_card_gets_one_reminder_and_shows_its_members_expire(harness: Harness) -> None:
    h = harness
    members = await flood(h, 4)
    card = group_message(h)
    h.clock.advance(4 * 3600 - 300)  # 5 minutes left for each; reminders go 10 minutes before expiry
    for _ in range(3):
        await h.rt.background.tick()
    reminders = [m for m in h.state.messages if m.thread_ts == card.ts]
    assert len(reminders) == 1 and "Requests on this card start expiring" in reminders[0].text
    h.clock.advance(301)
    await h.rt.background.tick()
    await h.settle()
    assert await statuses(h, [a.id for a in members]) == [Status.EXPIRED] * 4
    card = group_message(h)
    assert card.text == "4 × refund from agent:riley: 4 expired" and "4 × refund: 4 expired" in json.dumps(
        card.blocks, ensure_ascii=False
    )
    assert buttons(card) == []


async def test_approvals_that_ask_for_more_than_a_click_never_share_a_card(sqlite_harness: Harness) -> None:
    """Approvals that each ask for a typed confirmation (the policy's ``confirm:``) each get a card of their own,
    whose Approve opens the form: no group card, so no Approve all, ever decides them with one click. (A caller's
    metadata naming "confirm" is not the policy's and changes nothing.)"""
    h = sqlite_harness
    members = []
    for i in range(3):
        a = make_approval(now=h.clock.now() + i, key=f"confirm{i}", requester="agent:riley")
        members.append(a.model_copy(update={"confirm": ("amount",), "metadata": {"confirm": "REFUND"}}))
        await h.rt.store.approvals.create(members[-1])
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    assert not [m for m in h.cards() if " × refund from " in m.text]
    for a in members:
        assert buttons(h.card_for(a.id))[:2] == [ACTION_APPROVE_CONFIRM, "hitl_reject"]
    assert await statuses(h, [a.id for a in members]) == [Status.PENDING] * 3
