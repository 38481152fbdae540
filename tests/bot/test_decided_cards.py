"""A decided card tells the decision: who decided and when (each person named once, as a mention), the reason they
typed, read from their decision and shown in a box (cut, with Show reason in full), the before -> after of an edit;
a decided group card lists who decided, when, and how each member ended, with Open on each, paged past a screen.
Read from the blocks the bot posted to the emulated Slack Web API after every kind of decision: single, quorum
(partial, then complete), group, Modify, Trust, expiry and halt, on every store."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hitl.bot.views.arguments import ACTION_FULL_VALUE
from hitl.bot.views.blocks import HALTED, card
from hitl.bot.views.controls import ACTION_MODIFY, ACTION_REJECT, ACTION_TRUST
from hitl.bot.views.group_cards import (
    ACTION_GROUP_APPROVE,
    ACTION_GROUP_OPEN,
    ACTION_GROUP_PAGE,
    ACTION_GROUP_VIEW,
    group_card,
    money_fields,
)
from hitl.engine.domain.display import reveal
from hitl.engine.domain.models import Decision, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import InvalidInput
from hitl.sandbox.limits import message_problems
from hitl.sandbox.webapi import Message
from hitl.testing import FakeClock, make_approval
from tests.api.cli_process import hitl
from tests.bot.conftest import CONFIG, Harness
from tests.bot.hostile import HOSTILE, carried
from tests.bot.test_faithful_card import boxed_text
from tests.bot.test_group_cards import flood, group_message
from tests.bot.test_halt import ADMIN, h  # noqa: F401  (the harness with an admin who may halt)
from tests.bot.test_hostile_text import INVISIBLE, assert_inert
from tests.bot.test_modals_and_commands import field_values, last_view, propose

REASON = {"hitl_reason": {"value": {"type": "plain_text_input", "value": "the order was never shipped"}}}


def outcome(m: Message) -> list[str]:
    [block] = [b for b in m.blocks if str(b.get("block_id", "")).startswith("hitl_outcome:")]
    return str(block["text"]["text"]).split("\n")


def reasons(m: Message | dict[str, Any]) -> list[str]:
    """Each reason box on a card, as its text runs read."""
    blocks = m.blocks if isinstance(m, Message) else m["blocks"]
    return [
        "".join(run["text"] for run in b["elements"][0]["elements"])
        for b in blocks
        if str(b.get("block_id", "")).startswith("hitl_reason:")
    ]


def contexts(m: Message) -> list[str]:
    return [e["text"] for b in m.blocks if b["type"] == "context" for e in b["elements"]]


async def test_a_single_decision_names_its_decider_once_with_when_and_the_reason_from_the_decision(
    harness: Harness,
) -> None:
    a = await propose(harness, session="ses_single")
    await harness.svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE, reason="order 78291 checked"))
    await harness.settle()
    card = harness.card_for(a.id)
    assert message_problems(card.blocks) == (None, [])
    told = outcome(card)
    assert told[0].endswith("*Approved and done*") or told[0].endswith("*Approved*"), told
    assert told[1].startswith("<@U_SUPPORT1> approved <!date^") and told[1].endswith(" via api")
    assert reasons(card) == ["order 78291 checked"]  # an approval's reason, which the approval's field never holds
    assert "Reason given by <@U_SUPPORT1>" in contexts(card)
    assert "U_SUPPORT1 approved" not in json.dumps(card.blocks)  # one name per person: the mention only
    assert not [b for b in card.blocks if b["type"] == "actions"]


async def test_a_quorum_card_shows_each_votes_reason_before_and_after_it_is_met(harness: Harness) -> None:
    a = await propose(harness, amount=899, session="ses_quorum")
    await harness.svc.decide(DecideRequest(a.id, "U_FIN1", DecisionKind.APPROVE, reason="invoice matches"))
    await harness.settle()
    mid = harness.card_for(a.id)
    assert "1 of 2 finance approvals" in json.dumps(mid.blocks) and reasons(mid) == ["invoice matches"]
    assert any(b["type"] == "actions" for b in mid.blocks)  # still pending: its controls stay
    await harness.svc.decide(DecideRequest(a.id, "U_FIN2", DecisionKind.APPROVE, reason="customer called us"))
    await harness.settle()
    done = harness.card_for(a.id)
    told = outcome(done)
    assert told[1].startswith("<@U_FIN2> approved <!date^")
    assert told[2].startswith("Before: <@U_FIN1> approved <!date^")
    assert reasons(done) == ["invoice matches", "customer called us"]
    assert ["Reason given by <@U_FIN1>", "Reason given by <@U_FIN2>"] == [
        c for c in contexts(done) if c.startswith("Reason given by")
    ]


async def test_a_rejection_from_the_form_and_a_long_reason_open_in_full(harness: Harness) -> None:
    a = await propose(harness, session="ses_long")
    await harness.slack.click("U_SUPPORT2", copy.deepcopy(harness.card_for(a.id)), ACTION_REJECT)
    long = "The customer wrote twice <!here>; " * 60  # 2,040 characters, more than a card shows
    view_id, _ = last_view(harness)
    typed = {"hitl_reason": {"value": {"type": "plain_text_input", "value": long[:2000]}}}
    assert (await harness.slack.submit("U_SUPPORT2", view_id, typed)).status == 200
    await harness.settle()
    card = harness.card_for(a.id)
    [shown] = reasons(card)
    assert shown.endswith("…") and len(shown) <= 601 and long.startswith(shown[:-1])
    [button] = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    assert button["action_id"].startswith(ACTION_FULL_VALUE) and button["text"]["text"].startswith(
        "Show reason in full (2,000 characters)"
    )
    assert (await harness.slack.click("U_SUPPORT1", copy.deepcopy(card), button["action_id"])).status == 200
    _, full = last_view(harness)
    whole = boxed_text(full)
    assert long[1900:2000] in whole and whole.count("<!here>") == long[:2000].count("<!here>")  # all of it


async def test_modify_trust_and_expiry_each_tell_their_story(harness: Harness) -> None:
    a = await propose(harness, amount=120, session="ses_modify")
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_MODIFY)
    view_id, view = last_view(harness)
    assert (await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=100))).status == 200
    await harness.settle()
    edited = harness.card_for(a.id)
    assert outcome(edited)[1].startswith("<@U_SUPPORT1> modified and approved <!date^")
    [edit] = [b for b in edited.blocks if str(b.get("block_id", "")).startswith("hitl_edit:")]
    runs = [run["text"] for e in edit["elements"] for run in e["elements"]]
    assert "Changed by the reviewer (before → after)" in runs and runs.index("120") < runs.index("100")

    t = await propose(harness, amount=40, session="ses_trusted")
    assert (await harness.slack.click("U_SUPPORT2", copy.deepcopy(harness.card_for(t.id)), ACTION_TRUST)).status == 200
    await harness.settle()
    trusted = outcome(harness.card_for(t.id))
    assert trusted[1].startswith("<@U_SUPPORT2> approved and trusted the tool for this session <!date^")
    assert any(line.startswith("_Trust:_") for line in trusted)

    e = await propose(harness, amount=30, session="ses_expiring")
    harness.clock.advance(4 * 3600 + 1)
    await harness.rt.background.tick()
    await harness.settle()
    assert (await harness.svc.store.approvals.get(e.id)).status is Status.EXPIRED
    expired = harness.card_for(e.id)
    assert outcome(expired)[1:3] == ["Expired without a decision", outcome(expired)[2]]
    assert outcome(expired)[2].startswith("It expired <!date^") and reasons(expired) == []
    assert not [b for b in expired.blocks if b["type"] == "actions"]


async def test_a_rejection_while_halted_tells_who_and_why(h: Harness) -> None:  # noqa: F811
    a = await propose(h, session="ses_halted")
    await h.slack.command(ADMIN, "general", "halt refund refunds look wrong")
    await h.settle()
    halted = copy.deepcopy(h.card_for(a.id))
    assert any(b.get("block_id") == HALTED for b in halted.blocks)
    await h.slack.click("U_SUPPORT1", halted, ACTION_REJECT)
    view_id, _ = last_view(h)
    assert (await h.slack.submit("U_SUPPORT1", view_id, REASON)).status == 200
    await h.settle()
    card = h.card_for(a.id)
    assert outcome(card)[1].startswith("<@U_SUPPORT1> rejected <!date^") and reasons(card) == [
        "the order was never shipped"
    ]
    assert not any(b.get("block_id") == HALTED for b in card.blocks)  # the halt no longer concerns a decided card


async def test_a_decided_group_lists_who_when_and_each_member_with_open_paged_past_a_screen(harness: Harness) -> None:
    members = await flood(harness, 24)
    card = group_message(harness)
    assert "24 refunds from agent:riley" in json.dumps(card.blocks)  # named by what it holds, not by one member
    assert (await harness.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await harness.settle()
    done = group_message(harness)
    assert message_problems(done.blocks) == (None, [])
    [decided] = [b["text"]["text"] for b in done.blocks if b.get("block_id") == "hitl_group_decided"]
    assert "<@U_SUPPORT1> approved 24 · <!date^" in decided
    lines = [b for b in done.blocks if str(b.get("block_id", "")).startswith("hitl_member:")]
    assert len(lines) == 20 and all(b["accessory"]["action_id"] == ACTION_GROUP_OPEN for b in lines)
    assert all("<@U_SUPPORT1> approved <!date^" in b["text"]["text"] for b in lines)
    assert any("…and 4 more" in c for c in contexts(done))

    assert (await harness.slack.click("U_SUPPORT2", copy.deepcopy(done), ACTION_GROUP_VIEW)).status == 200
    _, first = last_view(harness)
    assert "*24 decided*" in first["blocks"][0]["text"]["text"] and "page 1 of 2" in first["blocks"][0]["text"]["text"]
    listed = [b["block_id"].split(":")[1] for b in first["blocks"] if str(b.get("block_id")).startswith("hitl_member:")]
    view_id = list(harness.state.views)[-1]
    assert (await harness.slack.click_in_view("U_SUPPORT2", view_id, ACTION_GROUP_PAGE)).status == 200
    await harness.settle()
    second = harness.state.views[view_id]
    on_two = [str(b.get("block_id")) for b in second["blocks"]]
    listed += [block_id.split(":")[1] for block_id in on_two if block_id.startswith("hitl_member:")]
    assert sorted(listed) == sorted(m.id for m in members)  # every member, each once

    open_first = copy.deepcopy(done)
    assert (await harness.slack.click("U_SUPPORT2", open_first, ACTION_GROUP_OPEN)).status == 200
    [own] = harness.ephemeral("U_SUPPORT2")[-1:]
    assert "<@U_SUPPORT1> approved" in json.dumps(own.blocks)  # its own card: the outcome, no live buttons


async def test_every_hostile_reason_stays_inert_on_the_card_the_home_tab_and_hitl_show(
    sqlite_harness: Harness, tmp_path: Path
) -> None:
    decided = []
    typed = [hostile for hostile in HOSTILE if carried(hostile)]
    for i, hostile in enumerate(typed):
        a = await propose(sqlite_harness, amount=10 + i, session=f"ses_hostile{i}")
        await sqlite_harness.svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.REJECT, reason=hostile))
        decided.append(a.id)
    [surrogate] = [hostile for hostile in HOSTILE if not carried(hostile)]
    with pytest.raises(InvalidInput, match="lone surrogate"):  # no decision can carry it: refused as it arrives
        await sqlite_harness.svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.REJECT, reason=surrogate))
    await sqlite_harness.settle()
    for approval_id, hostile in zip(decided, typed, strict=True):
        card = sqlite_harness.card_for(approval_id)
        assert_inert(card.blocks)
        if not hostile:  # an empty reason is no reason: no box
            assert reasons(card) == []
            continue
        [shown] = reasons(card)  # the reason is on the card, in its box: bounded, and literal
        assert len(shown) <= 601 and shown[:30] == reveal(hostile, keep="\n\t")[0][:30]
    assert (await sqlite_harness.slack.home_opened("U_SUPPORT1")).status == 200
    await sqlite_harness.rt.ctx.home.settled()
    assert_inert(sqlite_harness.state.homes["U_SUPPORT1"]["blocks"])

    env = {"HITL_STORE": f"sqlite:///{tmp_path / 'bot.db'}", "HITL_CONFIG": str(CONFIG)}
    code, out, err = await hitl("show", *decided, env=env)  # one process shows them all, one after another
    assert code == 0, err
    assert not INVISIBLE.search(out), repr(out[:300])  # no escape, bidi or hidden character reaches a terminal
    assert "\x1b" not in out and all(approval_id in out for approval_id in decided)


async def test_a_group_card_names_what_it_holds_totals_in_its_currency_and_drops_those_who_voted(
    harness: Harness,
) -> None:
    await flood(harness, 3, amount=900)
    card = group_message(harness, "finance-approvals")
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "3 refunds from agent:riley" in shown and "Group of `apr_" not in shown
    buttons = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    [approve_all] = [e for e in buttons if e["action_id"] == ACTION_GROUP_APPROVE]
    assert "amount totals 2,703 USD" in approve_all["confirm"]["text"]["text"]  # never a bare number

    assert (await harness.slack.click("U_FIN1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await harness.settle()
    voted = group_message(harness, "finance-approvals")
    fields = [f["text"] for b in voted.blocks if b["type"] == "section" for f in b.get("fields", [])]
    [approvers] = [f for f in fields if "*Approvers*" in f]
    assert approvers.endswith("finance · 2 each\nnot <@U_FIN1> (voted)")  # who decides now: not who voted
    assert (await harness.slack.click("U_FIN2", copy.deepcopy(voted), ACTION_GROUP_APPROVE)).status == 200
    await harness.settle()
    done = group_message(harness, "finance-approvals")
    [decided] = [b["text"]["text"] for b in done.blocks if b.get("block_id") == "hitl_group_decided"]
    assert "<@U_FIN1> approved 3 · <!date^" in decided and "<@U_FIN2> approved 3 · <!date^" in decided
    assert decided.count("<@U_FIN2>") == 1 and "U_FIN2 approved" not in json.dumps(done.blocks)  # one name each


def test_five_long_reasons_on_a_card_full_of_arguments_stay_within_slacks_limits() -> None:
    """The reasons share 600 characters of the card (each cut, with its Show reason in full), and the arguments give
    up what they take: the message stays within Slack's 50 blocks and its limit of text."""
    clock = FakeClock()
    base = make_approval(now=clock.now(), args={f"a{i}": "x" * 3000 for i in range(45)}, evidence="e" * 2000)
    votes = tuple(
        Decision(reviewer=f"U_FIN{i}", kind=DecisionKind.APPROVE, at=clock.now(), version=i + 1, reason="r" * 2000)
        for i in range(5)
    )
    decided = base.model_copy(update={"status": Status.APPROVED, "decisions": votes, "quorum": 5})
    blocks = card(decided, now=clock.now())
    assert message_problems(blocks) == (None, [])
    boxes = [b for b in blocks if str(b.get("block_id", "")).startswith("hitl_reason:")]
    shown = ["".join(run["text"] for run in b["elements"][0]["elements"]) for b in boxes]
    assert len(shown) == 5 and all(text == "r" * 120 + "…" for text in shown)
    full = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert [e["text"]["text"] for e in full][-5:] == ["Show reason in full (2,000 characters)"] * 5


def test_two_currencies_are_each_totalled_in_their_own_and_never_added() -> None:
    clock = FakeClock()
    members = [
        make_approval(now=clock.now(), args={"amount": 100 + i, "fee": 2}, key=f"k{i}", session_id="ses_cur")
        for i in range(3)
    ]
    declared = {"properties": {"amount": {"type": "number", "x-currency": "USD"}, "fee": {"x-currency": "EUR"}}}
    blocks = group_card(members, now=clock.now(), currencies=money_fields(declared))
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    [approve_all] = [e for e in buttons if e["action_id"] == ACTION_GROUP_APPROVE]
    said = approve_all["confirm"]["text"]["text"]
    assert "amount totals 303 USD; fee totals 6 EUR" in said and "309" not in said
    shown = json.dumps(blocks, ensure_ascii=False)
    assert "*amount*: total `303` USD over 3" in shown and "*fee*: total `6` EUR over 3" in shown
