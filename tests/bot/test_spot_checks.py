"""Spot checks (``oversight.spot_check``), on both stores: a sample of the actions that ran without a person is put
to reviewers after the fact; "Looks right" and "Flag" (with a note) are decisions like any other, count toward the
tool's correction rate and audit yield, a flag is a webhook event, and nothing ever executes a spot check."""

from __future__ import annotations

import copy

import pytest

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_REJECT
from hitl.engine.agents.gate import ToolGate
from hitl.engine.config.api import EventKind, WebhookSpec
from hitl.engine.domain.models import ApprovalKind, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.sampling import sampled
from hitl.engine.domain.spot_checks import SpotCheckSpec
from hitl.engine.domain.tally import summarize
from hitl.engine.errors import EngineError
from hitl.engine.subscribers.events import WEBHOOK_JOB, Outbox
from hitl.testing import FakeClock
from tests.bot.conftest import Harness, refund_harness_with
from tests.bot.test_modals_and_commands import last_view

SPOT = "\noversight:\n  spot_check:\n    tools: {look_up_order: 1.0}\n    tiers: {notify: 0.0}\n"


h = refund_harness_with(SPOT)


def test_the_sample_is_a_stable_draw_at_the_configured_rate() -> None:
    spec = SpotCheckSpec(rate=0.1, tools={"refund": 0.5}, tiers={"notify": 0.25})
    assert (spec.rate_for("refund", "auto"), spec.rate_for("email", "notify"), spec.rate_for("x", "auto")) == (
        0.5,
        0.25,
        0.1,
    )
    keys = [f"s:{i}" for i in range(4000)]
    picked = [k for k in keys if sampled(k, 0.25)]
    assert 0.2 < len(picked) / len(keys) < 0.3
    assert picked == [k for k in keys if sampled(k, 0.25)]  # the same action is sampled the same way every time
    assert not any(sampled(k, 0.0) for k in keys) and all(sampled(k, 1.0) for k in keys)


async def test_a_spot_check_is_answered_in_slack_counted_and_never_run(h: Harness, clock: FakeClock) -> None:
    hook = WebhookSpec(url="http://127.0.0.1:9/hook", secret_env="HOOK_SECRET", events=[EventKind.SPOT_CHECK_FLAGGED])
    svc = h.svc
    svc.events = Outbox(h.rt.store, clock, [hook])
    for order in ("1", "2"):
        p = await svc.propose(ProposeRequest("look_up_order", {"order_id": order}, session_id=f"s{order}"))
        assert p.may_run  # it runs at once; the look at it comes after
    await h.settle()
    [first, second] = sorted(
        (a for a in (await h.rt.store.approvals.list_pending()).items), key=lambda a: a.args["order_id"]
    )
    assert (first.tool, first.kind, first.metadata["tier"]) == ("spot:look_up_order", ApprovalKind.SPOT_CHECK, "auto")
    card = copy.deepcopy(h.card_for(first.id))
    # issue 63: the header carries the mark of its order id, text that reads as a number
    assert card.blocks[0]["text"]["text"] == "⚠ Spot check: look_up_order"
    [controls] = [b for b in card.blocks if b["type"] == "actions"]
    assert [e["text"]["text"] for e in controls["elements"]] == ["Looks right", "Flag"]

    assert (await h.slack.click("U_SUPPORT1", card, ACTION_APPROVE)).status == 200
    await h.slack.click("U_SUPPORT2", copy.deepcopy(h.card_for(second.id)), ACTION_REJECT)
    view_id, view = last_view(h)
    assert view["title"]["text"] == "Flag action"
    note = {"hitl_reason": {"value": {"type": "plain_text_input", "value": "wrong order looked up"}}}
    assert (await h.slack.submit("U_SUPPORT2", view_id, note)).status == 200
    await h.settle()
    assert h.card_for(first.id).blocks[0]["text"]["text"] == "⚠ Looks right: look_up_order"
    flagged = await h.rt.store.approvals.get(second.id)
    assert flagged.status is Status.REJECTED and flagged.reason == "wrong order looked up"
    assert h.card_for(second.id).blocks[0]["text"]["text"] == "⚠ Flagged: look_up_order"

    await h.rt.store.tallies.flush()
    [row] = [
        r
        for r in summarize(await h.rt.store.tallies.read(since=clock.now() - 86400, now=clock.now() + 1))
        if r.tool == "look_up_order"
    ]
    assert (row.tier, row.counts.get("spot_checked"), row.counts.get("spot_flagged")) == ("auto", 2.0, 1.0)
    assert row.correction_rate == 0.5 and row.audit_yield == 0.5
    assert not [
        r
        for r in summarize(await h.rt.store.tallies.read(since=clock.now() - 86400, now=clock.now() + 1))
        if r.tool.startswith("spot:")
    ]
    await h.rt.ctx.metrics.sweep()  # /metrics shows the audit yield per tool and tier
    async with h.http.get(f"{h.bot_url}/metrics") as resp:
        assert 'hitl_audit_yield_ratio{tier="auto",tool="look_up_order"} 0.5' in await resp.text()
    [job] = await h.rt.store.jobs.claim("test", kind=WEBHOOK_JOB, limit=10, now=clock.now(), lease=60.0)
    assert job.payload["event"]["type"] == "spot_check.flagged"
    assert job.payload["event"]["data"]["flag"] == {"by": "U_SUPPORT2", "note": "wrong order looked up"}

    gate = ToolGate(svc, worker_id="agent")  # nothing executes a spot check, whatever holds it
    ticket = await gate.ticket_of(await h.rt.store.approvals.get(first.id))
    for attempt in (gate.begin(ticket), gate.execute(ticket, lambda **kw: "ran")):
        with pytest.raises(EngineError, match="spot check of an action that already ran"):
            await attempt
