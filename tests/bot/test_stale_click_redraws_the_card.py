"""A click on a card whose approval is no longer pending (decided, expired or cancelled by a process that queued no
card update: its redraw was lost) is refused as before, the clicker told the same, and the card is drawn again:
once, through `hitl serve`'s card-update worker, showing the outcome, its buttons gone; a second click on the old
card (a replay) draws nothing more. A refusal that leaves the approval pending (not eligible) leaves its card alone.
A group card's Approve all, refused because a member was decided so, draws the group card once too. Signed clicks
against the emulated Slack Web API, on SQLite and Redis."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_MODIFY, ACTION_REJECT, ACTION_TRUST
from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.service import ApprovalService
from tests.bot.conftest import Harness
from tests.bot.test_gate_change_redraws_the_card import ticking
from tests.bot.test_group_cards import buttons, flood, group_message
from tests.bot.test_local_decision_redraws_the_card import outcome, pending_card, served, updates_of

__all__ = ["served", "ticking"]  # the fixtures, imported for these tests

_CLOSED = {
    "approved": (
        ":white_check_mark: *Approved*",
        ":lock: Already decided by <@U_SUPPORT1> (approved). Nothing changed.",
    ),
    "expired": (":hourglass: *Expired*", ":hourglass: This request expired. The requester has to propose it again."),
    "cancelled": (
        ":no_entry_sign: *Cancelled*",
        ":lock: Already decided by `the system` (cancelled). Nothing changed.",
    ),
}
"""How each closing shows on the redrawn card (its outcome's first line), and what an Approve click on it is told."""


async def close_without_a_redraw(h: Harness, tmp_path: Path, a: Approval, how: str) -> None:
    """Close ``a`` as a process holding no notifier does (an agent process, a lost queueing): nothing is queued
    for its card, which keeps its live buttons."""
    elsewhere = ApprovalService.from_config(load_config(tmp_path / "hitl.yaml"), store=h.rt.store, clock=h.clock)
    if how == "approved":
        await elsewhere.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE, via="api"), resume=False)
    elif how == "expired":
        h.clock.advance(a.expires_at - h.clock.now() + 1)
        assert [e.id for e in await elsewhere.expire_due()] == [a.id]
    else:
        await elsewhere.cancel(a.id, actor="agent:riley", reason="the run was stopped")
    assert (await h.rt.store.approvals.get(a.id)).status.value == how
    await h.settle()


@pytest.mark.parametrize("how", list(_CLOSED))
async def test_an_approve_click_on_a_stale_card_is_refused_and_draws_the_card_once(
    served: Harness, tmp_path: Path, how: str
) -> None:
    h = served
    a, card = await pending_card(h, f"ses_stale_{how}")
    shown = copy.deepcopy(card)
    await close_without_a_redraw(h, tmp_path, a, how)
    before = len(h.state.calls_to("chat.update"))
    assert updates_of(h, card, before) == [] and buttons(h.card_for(a.id)) == buttons(shown)  # the lost redraw

    assert (await h.slack.click("U_SUPPORT2", shown, ACTION_APPROVE)).status == 200
    await h.settle()
    said, told = _CLOSED[how]
    assert [m.text for m in h.ephemeral("U_SUPPORT2")] == [told]  # answered as before
    assert len(updates_of(h, card, before)) == 1
    redrawn = h.card_for(a.id)
    assert buttons(redrawn) == [] and outcome(redrawn).split("\n")[0] == said

    assert (await h.slack.click("U_SUPPORT2", shown, ACTION_APPROVE)).status == 200  # the old card, clicked again
    await h.settle()
    assert [m.text for m in h.ephemeral("U_SUPPORT2")] == [told, told]
    assert len(updates_of(h, card, before)) == 1  # drawn once: it is current now
    assert (await h.rt.store.approvals.get(a.id)).status.value == how  # nothing changed


@pytest.mark.parametrize("button", [ACTION_REJECT, ACTION_MODIFY])
async def test_a_form_button_on_a_stale_card_draws_it_once_and_a_pending_ones_refusal_none(
    served: Harness, tmp_path: Path, button: str
) -> None:
    h = served
    a, card = await pending_card(h, f"ses_form_{button}")
    shown = copy.deepcopy(card)
    before = len(h.state.calls_to("chat.update"))
    # A refusal that leaves the approval pending (not eligible) leaves its card alone: that card is current.
    assert (await h.slack.click("U_STRANGER", shown, ACTION_APPROVE)).status == 200
    await h.settle()
    assert [m.text for m in h.ephemeral("U_STRANGER")] == [
        ":no_entry: You are not a reviewer for this request: it needs *support*."
    ]
    assert updates_of(h, card, before) == []

    await close_without_a_redraw(h, tmp_path, a, "approved")

    assert (await h.slack.click("U_SUPPORT2", shown, button)).status == 200
    await h.settle()
    assert len(updates_of(h, card, before)) == 1
    assert buttons(h.card_for(a.id)) == []
    assert (await h.rt.store.approvals.get(a.id)).status is Status.APPROVED


async def test_approve_all_on_a_group_card_a_lost_redraw_left_stale_draws_the_group_card_once(
    served: Harness, tmp_path: Path
) -> None:
    h = served
    members = await flood(h, 3)
    old = copy.deepcopy(group_message(h))
    assert old.text == "3 × refund from agent:riley: 3 of 3 need approval"
    await close_without_a_redraw(h, tmp_path, members[1], "approved")
    before = len(h.state.calls_to("chat.update"))
    assert updates_of(h, old, before) == [] and group_message(h).text == old.text  # the lost redraw

    assert (await h.slack.click("U_SUPPORT2", old, ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    assert "This group changed since its card was drawn" in h.ephemeral("U_SUPPORT2")[-1].text  # answered as before
    assert len(updates_of(h, old, before)) == 1
    assert group_message(h).text == "3 × refund from agent:riley: 2 of 3 need approval"
    assert [(await h.rt.store.approvals.get(m.id)).status for m in members] == [
        Status.PENDING,
        Status.APPROVED,
        Status.PENDING,
    ]


async def test_a_trust_click_on_a_stale_card_draws_the_card_once(ticking: Harness, tmp_path: Path) -> None:
    h = ticking  # serving a tool that may be trusted for a session
    p = await h.svc.propose(ProposeRequest("pay", {"amount": 5}, session_id="ses_trust"))
    assert p.approval is not None
    a, card = p.approval, h.card_for(p.approval.id)
    assert ACTION_TRUST in buttons(card)
    shown = copy.deepcopy(card)
    elsewhere = ApprovalService.from_config(load_config(tmp_path / "hitl.yaml"), store=h.rt.store, clock=h.clock)
    await elsewhere.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.REJECT, reason="no", via="api"))
    before = len(h.state.calls_to("chat.update"))

    assert (await h.slack.click("U_SUPPORT1", shown, ACTION_TRUST)).status == 200
    await h.settle()
    told = ":lock: Already decided by <@U_SUPPORT1> (rejected). Nothing changed."
    assert [m.text for m in h.ephemeral("U_SUPPORT1")] == [told]
    assert len(updates_of(h, card, before)) == 1
    redrawn = h.card_for(a.id)
    assert buttons(redrawn) == [] and outcome(redrawn).split("\n")[0] == ":x: *Rejected*"
