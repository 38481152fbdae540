"""The stop switch in the engine, on both stores: a halt refuses new proposals, approvals and executions of its
tools (rejecting still works), is audited, reaches another process's service within a second, and survives a
restart; lifting it lets everything go on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from hitl.engine.agents.gate import ToolCall, ToolGate
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.halts import HaltOrder
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import ErrorCode, Halted
from hitl.engine.oversight.freshness import FRESH_FOR
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.testing import FakeClock
from tests.bound_decisions import bound_request

CONFIG = parse_config(
    """
roles: {support: [U_S1, U_S2], admin: [U_ADMIN]}
policy:
  allowed_tools: [look_up_order]
  tools:
    refund: {tier: approve, role: support}
"""
)
REFUND = {"order_id": "1", "amount": 10}


def service(store: Store, clock: FakeClock) -> ApprovalService:
    return ApprovalService.from_config(CONFIG, store=store, clock=clock)


async def test_a_halt_refuses_what_it_covers_and_is_audited(opener: Callable[[], Store], clock: FakeClock) -> None:
    svc = service(opener(), clock)
    pending = (await svc.propose(ProposeRequest("refund", REFUND, session_id="s1"))).approval
    rejected_later = (await svc.propose(ProposeRequest("refund", {**REFUND, "amount": 11}, session_id="s1"))).approval
    assert pending is not None and rejected_later is not None
    await svc.switch.halt("refund", by="U_ADMIN", reason="refunds look wrong")

    with pytest.raises(Halted) as refused:
        await svc.propose(ProposeRequest("refund", {**REFUND, "amount": 12}, session_id="s2"))
    assert refused.value.code is ErrorCode.HALTED and refused.value.retryable
    assert "halted by U_ADMIN: refunds look wrong" in refused.value.message and "hitl unhalt --tool refund" in (
        refused.value.message
    )
    assert (await svc.propose(ProposeRequest("look_up_order", {"id": "1"}, session_id="s2"))).may_run  # not covered
    for kind in (DecisionKind.APPROVE, DecisionKind.TRUST, DecisionKind.MODIFY):
        with pytest.raises(Halted):
            args = {**REFUND, "amount": 5} if kind is DecisionKind.MODIFY else None
            await svc.decide(DecideRequest(pending.id, "U_S1", kind, args=args))
    # Bound exactly as a Slack card binds it (version and hash): refused too, without the fast path.
    with pytest.raises(Halted):
        await svc.decide(bound_request(pending, "U_S1"))
    assert (await svc.store.approvals.get(pending.id)).status is Status.PENDING
    no = await svc.decide(DecideRequest(rejected_later.id, "U_S1", DecisionKind.REJECT, reason="no"))
    assert no.status is Status.REJECTED  # rejecting still works

    await svc.switch.halt(None, by="U_ADMIN")  # every tool
    with pytest.raises(Halted, match="every tool is stopped until `hitl unhalt`"):
        await svc.propose(ProposeRequest("look_up_order", {"id": "1"}, session_id="s2"))
    assert (await svc.switch.lift(None, by="U_ADMIN")) is not None
    assert (await svc.switch.lift("refund", by="U_ADMIN")) is not None
    ok = await svc.decide(DecideRequest(pending.id, "U_S1", DecisionKind.APPROVE))
    assert ok.status is Status.APPROVED

    trail = await svc.store.audit.entries(limit=1000)
    assert [e.event for e in trail if "halted" in e.event] == ["halted", "halted", "unhalted", "unhalted"]
    refusals = [e for e in trail if e.outcome == "halted"]
    assert len(refusals) == 6  # two proposals and four decisions, each audited with who and why
    assert {e.actor for e in refusals} >= {"U_S1", "agent"}
    checked, broken = await svc.store.audit.verify()
    assert broken is None and checked == len(trail)


async def test_what_was_approved_before_a_halt_does_not_run_until_it_is_lifted(
    opener: Callable[[], Store], clock: FakeClock
) -> None:
    svc = service(opener(), clock)
    gate = ToolGate(svc, worker_id="agent-1")
    call = ToolCall("refund", REFUND, session="s1", framework="test", call_id="c1")
    ticket = await gate.check(call)
    assert ticket.approval is not None
    await svc.decide(DecideRequest(ticket.approval.id, "U_S1", DecisionKind.APPROVE))
    ticket = await gate.refresh(ticket)
    assert ticket.runs
    await svc.switch.halt("refund", by="U_ADMIN", reason="incident 42")
    ran: list[int] = []

    async def refund(order_id: str, amount: int) -> int:
        ran.append(amount)
        return amount

    with pytest.raises(Halted, match="incident 42"):
        await gate.begin(ticket)
    with pytest.raises(Halted):
        await gate.execute(ticket, refund)
    assert ran == []
    await svc.switch.lift("refund", by="U_ADMIN")
    assert await gate.execute(ticket, refund) == 10 and ran == [10]


async def test_another_process_obeys_at_its_next_read_and_a_restart_keeps_the_halt(
    opener: Callable[[], Store], clock: FakeClock
) -> None:
    here, there = service(opener(), clock), service(opener(), clock)
    assert (await there.propose(ProposeRequest("look_up_order", {"id": "1"}, session_id="s"))).may_run  # cached
    await here.switch.halt(None, by="U_ADMIN", reason="stop everything")
    await asyncio.sleep(FRESH_FOR + 0.05)  # the other process's last read is older than FRESH_FOR now
    with pytest.raises(Halted):  # its first look after it reads the store again: obeyed within FRESH_FOR, < 1 s
        await there.propose(ProposeRequest("look_up_order", {"id": "1"}, session_id="s"))
    restarted = service(opener(), clock)  # a new process on the same store
    assert [o.reason for o in await restarted.switch.orders()] == ["stop everything"]
    with pytest.raises(Halted):
        await restarted.propose(ProposeRequest("refund", REFUND, session_id="s"))


async def test_a_persons_approval_obeys_another_processs_halt_at_once(
    opener: Callable[[], Store], clock: FakeClock
) -> None:
    # The page or card already reads "Stopped" from the store; an approval sent the same instant must agree with it,
    # though this process read the orders (none) a moment ago and agents' calls may use that read for half a second.
    here, there = service(opener(), clock), service(opener(), clock)
    pending = (await there.propose(ProposeRequest("refund", REFUND, session_id="s"))).approval
    assert pending is not None
    assert (await there.propose(ProposeRequest("look_up_order", {"id": "1"}, session_id="s"))).may_run  # read: none
    await here.switch.halt("refund", by="U_ADMIN", reason="refunds look wrong")
    with pytest.raises(Halted):
        await there.decide(DecideRequest(pending.id, "U_S1", DecisionKind.APPROVE))
    assert (await there.store.approvals.get(pending.id)).status is Status.PENDING
    rejected = await there.decide(DecideRequest(pending.id, "U_S1", DecisionKind.REJECT, reason="halted anyway"))
    assert rejected.status is Status.REJECTED  # rejecting still works


async def test_calls_that_find_the_orders_old_share_one_read_of_the_store(
    opener: Callable[[], Store], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent framework runs a turn's tool calls at once. Each allowed call checks the stop switch; when its
    orders are older than FRESH_FOR, the calls that find them so wait for one read between them. (On Redis and
    PostgreSQL, where a read awaits the network, every call sent its own read: 200 reads for 200 calls, each half
    second, which made an adapter's allowed call cost 150-200 µs more there than on SQLite.)"""
    store = opener()
    reads: list[int] = []
    active = store.halts.active

    async def counted() -> list[HaltOrder]:
        reads.append(1)
        return await active()

    monkeypatch.setattr(store.halts, "active", counted)  # the real read, counted
    gate = ToolGate(service(store, clock), worker_id="agent-1")
    calls = [
        ToolCall("look_up_order", {"id": str(i)}, session="s", framework="test", call_id=f"c{i}") for i in range(20)
    ]
    tickets = await asyncio.gather(*(gate.check(call) for call in calls))
    assert [t.outcome for t in tickets] == ["run"] * 20
    assert len(reads) == 1

    # A halt given here is read again at the next look; a waiter cancelled does not cancel the read the others
    # wait for.
    switch = gate.service.switch
    await switch.halt("look_up_order", by="U_ADMIN", reason="stop")
    first, second = asyncio.ensure_future(switch.orders()), asyncio.ensure_future(switch.orders())
    await asyncio.sleep(0)
    first.cancel()
    assert [o.reason for o in await second] == ["stop"] and len(reads) == 2
    assert (await gate.check(calls[0])).outcome == "deny" and len(reads) == 2
