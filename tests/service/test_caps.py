"""Caps on approvals (``policy.caps``), opt-in: the excess is refused with a coded, retryable ``approval_flood``,
audited and counted for alerts, creating nothing; a repeat of an action already asked for re-attaches; practice
twins never count; racing proposals never take more places than there are. On every store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.alerts import AlertsSpec, evaluate
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.tally import summarize
from hitl.engine.errors import ErrorCode, Flooded
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url

BASE = """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  tools:
    refund: {tier: approve, role: support}
"""
CAPS = BASE + "  caps:\n    session: {max: 3, per: 10m}\n    tool: {max: 5, per: 1h}\n"


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="caps"))
    yield s
    await s.close()


def service(store: Store, clock: FakeClock, text: str) -> ApprovalService:
    return ApprovalService.from_config(parse_config(text), store=store, clock=clock)


def refund(order: int, session: str) -> ProposeRequest:
    return ProposeRequest("refund", {"order_id": str(order), "amount": 5}, session_id=session)


async def pending(store: Store) -> int:
    return len((await store.approvals.list_pending(limit=500)).items)


async def test_caps_are_off_by_default(store: Store, clock: FakeClock) -> None:
    svc = service(store, clock, BASE)
    for i in range(40):
        assert (await svc.propose(refund(i, "one-session"))).created
    assert await pending(store) == 40


async def test_the_excess_is_refused_coded_audited_counted_and_retryable(store: Store, clock: FakeClock) -> None:
    svc = service(store, clock, CAPS)
    made = [await svc.propose(refund(i, "s1")) for i in range(3)]
    assert all(p.created for p in made)
    with pytest.raises(Flooded) as refused:
        await svc.propose(refund(3, "s1"))
    err = refused.value
    assert err.code is ErrorCode.APPROVAL_FLOOD and err.retryable and err.context["retry_after"] == 600
    assert err.context["cap"] == "session" and "policy.caps.session" in err.message and "Retry after" in err.message
    assert await pending(store) == 3  # nothing was created
    again = await svc.propose(refund(1, "s1"))  # the same action asked again: re-attached, not refused
    assert again.approval is not None and not again.created and again.approval.id == made[1].approval.id  # type: ignore[union-attr]
    [entry] = [e for e in await store.audit.entries() if e.event == "refused"]
    assert (entry.actor, entry.outcome) == ("agent:riley", "approval_flood") and "s1: refund:" in entry.detail
    await store.tallies.flush()
    rows = summarize(await store.tallies.read(since=clock.now() - 60, now=clock.now() + 1))
    alerts = AlertsSpec.model_validate({"rules": [{"name": "floods", "figure": "flooded", "above": 0}]})
    [reading] = evaluate(alerts, rows, {})
    assert reading.firing and reading.value == 1

    assert (await svc.propose(refund(10, "s2"))).created  # another session has its own cap...
    assert (await svc.propose(refund(11, "s2"))).created
    with pytest.raises(Flooded) as by_tool:  # ...but the tool's cap of 5 an hour covers both
        await svc.propose(refund(12, "s3"))
    assert by_tool.value.context["cap"] == "tool"
    clock.advance(601)  # the session's window has moved on; the tool's has not
    with pytest.raises(Flooded):
        await svc.propose(refund(13, "s1"))
    clock.advance(3600)
    assert (await svc.propose(refund(14, "s1"))).created


async def test_racing_proposals_take_exactly_the_places_there_are(store: Store, clock: FakeClock) -> None:
    svc = service(store, clock, BASE + "  caps:\n    tool: {max: 10, per: 1h}\n")
    results = await asyncio.gather(*(svc.propose(refund(i, f"race{i}")) for i in range(60)), return_exceptions=True)
    created = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, Flooded)]
    assert len(created) == 10 and len(refused) == 50 and await pending(store) == 10


async def test_practice_twins_never_count(store: Store, clock: FakeClock) -> None:
    practice = (
        "oversight:\n  practice:\n    delay: 0\n    tools: {refund: 1.0}\n    defects:\n      refund:\n"
        '        - {name: more, set: {amount: 9999}, says: "far above the order"}\n'
    )
    svc = service(store, clock, BASE + "  caps:\n    tool: {max: 2, per: 1h}\n" + practice)
    for i in range(2):
        assert (await svc.propose(refund(i, f"t{i}"))).created
    assert await pending(store) == 4  # two real approvals, each with its practice twin
    with pytest.raises(Flooded):
        await svc.propose(refund(2, "t2"))
