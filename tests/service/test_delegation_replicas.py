"""A delegation ended in one process stops handing anything on in every other within a second, on every store; one
that runs out is recorded ended once, however many replicas sweep; a store that fails decides nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Reviewer, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import DecisionRefused, ErrorCode, StoreError
from hitl.engine.oversight.freshness import FRESH_FOR
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.testing import FakeClock
from tests.waiting import eventually

CONFIG = parse_config(
    """
roles: {finance: [U_ANA, U_CY], support: [U_BEN]}
policy:
  tools:
    pay: {tier: approve, role: finance}
"""
)
DAY = 86400.0


def service(store: Store, clock: FakeClock) -> ApprovalService:
    return ApprovalService.from_config(CONFIG, store=store, clock=clock)


async def _ana(svc: ApprovalService) -> Reviewer:
    return (await svc.reviewers.reviewer("U_ANA")).in_own_right()


async def test_an_end_reaches_every_replica_at_its_next_read(opener: Callable[[], Store], clock: FakeClock) -> None:
    here, there = service(opener(), clock), service(opener(), clock)
    given = await here.delegations.give(
        await _ana(here), "U_BEN", until=clock.now() + 3 * DAY, role=None, via="cli", rule=here.delegates
    )
    ben = await eventually(
        lambda: _holds(there, "finance"), what="the other replica to hand finance to U_BEN", timeout=5
    )
    assert dict(ben.delegated) == {"finance": "U_ANA"}
    await here.delegations.end("U_ANA", given.id)
    await asyncio.sleep(FRESH_FOR + 0.05)  # the other replica's last read is older than FRESH_FOR now
    p = await there.propose(ProposeRequest("pay", {"to": "V", "amount": 7}, session_id="s"))
    assert p.approval is not None
    with pytest.raises(DecisionRefused) as refused:  # its first look after it reads the store again: < 1 s
        await there.decide(DecideRequest(p.approval.id, "U_BEN", DecisionKind.APPROVE))
    assert refused.value.code is ErrorCode.NOT_ELIGIBLE


async def _holds(svc: ApprovalService, role: str) -> Reviewer | None:
    ben = await svc.reviewers.reviewer("U_BEN")
    return ben if role in ben.roles else None


async def test_a_delegation_that_runs_out_is_ended_once_across_replicas(
    opener: Callable[[], Store], clock: FakeClock
) -> None:
    replicas = [service(opener(), clock) for _ in range(3)]
    svc = replicas[0]
    await svc.delegations.give(
        await _ana(svc), "U_BEN", until=clock.now() + DAY, role="finance", via="slack", rule=svc.delegates
    )
    clock.advance(DAY)  # the last instant of it has passed
    await asyncio.gather(*(r.delegations.sweep() for r in replicas))
    p = await svc.propose(ProposeRequest("pay", {"to": "V", "amount": 5}, session_id="s"))
    assert p.approval is not None
    ended = [e for e in await svc.store.audit.entries() if e.event == "delegation_ended"]
    assert len(ended) == 1 and ended[0].actor == "expiry" and "ran out" in ended[0].detail
    with pytest.raises(DecisionRefused) as refused:
        await replicas[2].decide(DecideRequest(p.approval.id, "U_BEN", DecisionKind.APPROVE))
    assert refused.value.code is ErrorCode.NOT_ELIGIBLE
    done = await replicas[1].decide(DecideRequest(p.approval.id, "U_CY", DecisionKind.APPROVE))
    assert done.status is Status.APPROVED and done.decisions[-1].acting_for is None


async def test_when_the_delegations_cannot_be_read_nothing_is_decided(
    opener: Callable[[], Store], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = await service(opener(), clock).propose(ProposeRequest("pay", {"to": "V", "amount": 5}, session_id="s"))
    assert p.approval is not None
    store = opener()  # another replica, whose reads of the delegations fail

    async def away(*, now: float) -> list[object]:
        raise StoreError("store unavailable")

    monkeypatch.setattr(store.delegations, "active", away)
    with pytest.raises(StoreError):
        await service(store, clock).decide(DecideRequest(p.approval.id, "U_ANA", DecisionKind.APPROVE))
    assert (await store.approvals.get(p.approval.id)).status is Status.PENDING
