"""An agent's process (a real `hitl.ToolGate` on `hitl.ApprovalService`, no Slack client, its own store client) that
closes an approval `hitl serve` carded (the agent stopped waiting: cancelled; its wait ran past the expiry: expired;
its drift check expired an approved one as drifted) queues the card's update as `hitl` commands do: `hitl serve`'s
card-update worker draws the card once, its outcome said and its buttons gone. On SQLite and Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import hitl
import tests.consequence_tools as ticks
from hitl.engine.errors import ErrorCode
from hitl.engine.ports import Store
from hitl.testing import FakeClock
from tests.agents.test_consequence_drift import TICKING
from tests.bot.conftest import Harness, harness_on
from tests.bot.test_group_cards import buttons
from tests.bot.test_local_decision_redraws_the_card import outcome, served, updates_of

__all__ = ["served"]  # the fixture, imported for these tests

REFUND = {"order_id": "78291", "customer_id": "C-1042", "amount": 120, "reason": "damaged"}


@pytest.fixture
async def agent_store(served: Harness) -> AsyncIterator[Store]:
    """The agent process's own client of the store `hitl serve` serves."""
    assert served.store_url is not None
    store = hitl.open_store(served.store_url)
    yield store
    await store.close()


@pytest.mark.parametrize("how", ["cancelled", "expired"])
async def test_an_agent_gate_that_closes_an_approval_has_hitl_serve_draw_its_card_once(
    served: Harness, agent_store: Store, tmp_path: Path, how: str
) -> None:
    h = served
    config = hitl.load_config(tmp_path / "hitl.yaml")
    gate = hitl.ToolGate(hitl.ApprovalService.from_config(config, store=agent_store, clock=h.clock))
    ticket = await gate.check(hitl.ToolCall("refund", REFUND, session=f"ses_gate_{how}", framework="ask"))
    assert ticket.pending and ticket.approval is not None
    approval = ticket.approval
    await h.rt.ctx.notifier.sweep()  # hitl serve cards what the agent asked (its sweep, as the store's wake-up)
    await h.settle()
    card = h.card_for(approval.id)
    assert buttons(card) != []
    before = len(h.state.calls_to("chat.update"))

    if how == "cancelled":  # the agent stops waiting: the approval is cancelled, nobody may approve it behind its back
        closed = await gate.wait(ticket, timeout=0)
        said = ":no_entry_sign: *Cancelled*"
    else:  # its wait finds the approval past its expiry and expires it
        h.clock.advance(approval.expires_at - h.clock.now() + 1)
        closed = await gate.wait(ticket)
        said = ":hourglass: *Expired*"
    assert closed.approval is not None and closed.approval.status.value == how
    await h.rt.ctx.notifier.sweep()  # what the card worker's next look at the queue finds
    await h.settle()

    assert len(updates_of(h, card, before)) == 1
    card = h.card_for(approval.id)
    assert outcome(card).split("\n")[0] == said
    assert buttons(card) == []


@pytest.fixture(params=("sqlite", "redis"))
async def ticking(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """`hitl serve` on each store, serving a tool whose consequence changes each time it is computed."""
    ticks.TICKS.update(n=0, fail_from=None)
    async with harness_on(request, tmp_path, clock, TICKING) as h:
        yield h


async def test_an_agent_gate_whose_drift_check_expires_an_approval_has_hitl_serve_draw_its_card_once(
    ticking: Harness, tmp_path: Path
) -> None:
    h = ticking
    assert h.store_url is not None
    agent_store = hitl.open_store(h.store_url)
    try:
        config = hitl.load_config(tmp_path / "hitl.yaml")
        gate = hitl.ToolGate(hitl.ApprovalService.from_config(config, store=agent_store, clock=h.clock))
        ticket = await gate.check(hitl.ToolCall("pay", {"amount": 5}, session="ses_drift", framework="ask"))
        for _ in range(3):  # approved in Slack each time, and each time what it will do changed before it ran
            assert ticket.pending and ticket.approval is not None
            approval = ticket.approval
            await h.rt.ctx.notifier.sweep()
            await h.settle()
            await h.svc.decide(hitl.DecideRequest(approval.id, "U_SUPPORT1", hitl.DecisionKind.APPROVE))
            await h.settle()
            before = len(h.state.calls_to("chat.update"))
            with pytest.raises(hitl.GateRefused) as refused:
                await gate.begin(await gate.refresh(ticket))
            assert refused.value.code is ErrorCode.CONSEQUENCE_DRIFTED
            ticket = await gate.refresh(ticket)
    finally:
        await agent_store.close()
    assert ticket.approval is not None and ticket.approval.id == approval.id  # the third: expired, not asked again
    assert ticket.approval.status is hitl.Status.EXPIRED
    await h.rt.ctx.notifier.sweep()
    await h.settle()

    card = h.card_for(approval.id)
    assert len(updates_of(h, card, before)) == 1
    assert outcome(card).split("\n")[0] == ":hourglass: *Expired*"
    assert buttons(card) == []
