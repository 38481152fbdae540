"""Every pending approval gets its card promptly, and one card's failing update never holds up the others."""

from __future__ import annotations

import copy

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.models import Status
from hitl.engine.domain.requests import ProposeRequest
from tests.bot.conftest import Harness
from tests.waiting import eventually


async def test_a_failing_card_update_backs_off_without_holding_up_other_cards(harness: Harness) -> None:
    first = await harness.svc.propose(
        ProposeRequest("refund", {"order_id": "1", "customer_id": "C1", "amount": 5}, session_id="x1")
    )
    second = await harness.svc.propose(
        ProposeRequest("refund", {"order_id": "2", "customer_id": "C2", "amount": 6}, session_id="x2")
    )
    assert first.approval is not None and second.approval is not None
    harness.rt.ctx.notifier.updates.backoff = lambda n: 2.0
    for _ in range(4):  # the SDK retries a 5xx three times; the fourth failure reaches the notifier
        harness.state.fail_next("chat.update", status=503)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(first.approval.id)), ACTION_APPROVE)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(second.approval.id)), ACTION_APPROVE)
    await eventually(  # not behind the first card's backoff
        lambda: "Approved" in harness.card_for(second.approval.id).blocks[0]["text"]["text"],
        what="the second card's update",
        timeout=1.5,
        interval=0.02,
    )
    assert "Approved" not in harness.card_for(first.approval.id).blocks[0]["text"]["text"]  # still backing off
    await harness.settle()  # then it lands too
    assert "Approved" in harness.card_for(first.approval.id).blocks[0]["text"]["text"]
    assert (await harness.svc.store.approvals.get(first.approval.id)).status is Status.APPROVED


async def test_a_card_is_rendered_once_per_version_and_reused_for_every_update_of_it(harness: Harness) -> None:
    """The queue may bring one version's card up to date several times (a change seen twice, a replica taking over):
    each update sends the blocks rendered the first time. A new version, or a minute that changes what "expires in"
    reads, renders it again."""
    notifier = harness.rt.ctx.notifier
    p = await harness.svc.propose(
        ProposeRequest("refund", {"order_id": "7", "customer_id": "C7", "amount": 5}, session_id="c7")
    )
    assert p.approval is not None
    await harness.settle()
    rendered = notifier.cards.rendered
    updates = len(harness.state.calls_to("chat.update"))
    for _ in range(3):  # the same version, updated again and again
        await notifier.approval_changed(p.approval)
        await harness.settle()
    sent = harness.state.calls_to("chat.update")[updates:]
    assert len(sent) == 3
    assert notifier.cards.rendered == rendered  # nothing rendered anew
    assert all(c.args["blocks"] == sent[0].args["blocks"] for c in sent)

    harness.clock.advance(120)  # "expires in" reads two minutes less: rendered again, with the new words
    await notifier.approval_changed(p.approval)
    await harness.settle()
    assert notifier.cards.rendered == rendered + 1
    expires = [f["text"] for f in harness.card_for(p.approval.id).blocks[1]["fields"] if "Expires" in f["text"]]
    assert expires and "min)" in expires[0]
    assert expires[0] not in str(sent[0].args["blocks"])

    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(p.approval.id)), ACTION_APPROVE)
    await harness.settle()  # a decision is a new version: its card is rendered once more
    assert notifier.cards.rendered == rendered + 2
    assert "Approved" in harness.card_for(p.approval.id).blocks[0]["text"]["text"]
