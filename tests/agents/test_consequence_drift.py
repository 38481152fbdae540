"""Drift (``consequence_check: true``): just before an approved call is handed over, its consequence runs again and
is compared with the one its deciders saw. The refund example's own consequence catches a second refund landing
between approval and execution: nothing runs, the approval is asked again showing both (card, decision page,
``hitl show``'s view), audited; three drifts in a row expire it as ``drifted``; ``consequence_ignore`` leaves a
field out; a check that cannot compute it runs nothing. Through ``ask``, ``guard`` and a workflow run, on SQLite and
Redis."""

from __future__ import annotations

import asyncio
import importlib.util
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tests.consequence_tools as ticks
from hitl.api.models import ApprovalView
from hitl.bot.views.blocks import card
from hitl.bot.views.consequence import CONSEQUENCE, DRIFT
from hitl.bot.views.home import Waiting, home_view
from hitl.engine.agents.ask import ActionRejected, Approvals
from hitl.engine.agents.gate import GateRefused
from hitl.engine.config.hitl_yaml import load_config, parse_config
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.records import ClaimState
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.execution.effects import Effects
from hitl.engine.execution.tools import Tool
from hitl.engine.ports import Store
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from hitl.web.pages import decision_page
from tests.backends import fresh_store_url
from tests.waiting import eventually

EXAMPLE = Path(__file__).parents[2] / "examples" / "refund"
REFUND = {"order_id": "78291", "customer_id": "C-1042", "amount": 120}
TICKING = """
roles: {support: [U_SUPPORT1]}
policy:
  tools:
    pay:
      role: support
      consequence: "tests.consequence_tools:ticking"
      consequence_check: true
      consequence_ignore: [generated_at]
"""


@pytest.fixture(params=("sqlite", "redis"))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="dft"))
    yield s
    await s.close()


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The refund example's tools on a shop database of this test's own, its consequence's folder importable."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.syspath_prepend(str(EXAMPLE))
    spec = importlib.util.spec_from_file_location("refund_example_tools", EXAMPLE / "tools.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.connect().close()  # made and seeded, as the workflow's first look-up does
    return module


def checked_example() -> Any:
    """The refund example's hitl.yaml as shipped: its consequence and its check are on."""
    config = load_config(EXAMPLE / "hitl.yaml")
    refund = config.policy.tools["refund"]
    assert (refund.consequence, refund.consequence_check) == ("shop_consequences:refund", True)
    return config


async def next_pending(store: Store, tool: str, *, besides: set[str]) -> Approval:
    async def found() -> Approval | None:
        page = (await store.approvals.list_pending()).items
        return next((a for a in page if a.tool == tool and a.id not in besides), None)

    return await eventually(found, what=f"a new pending {tool}", interval=0.005)


def refunds(shop: ModuleType) -> list[tuple[str, float]]:
    with sqlite3.connect(shop.shop_path()) as db:
        return [(str(k), float(a)) for k, a in db.execute("SELECT idempotency_key, amount FROM refunds ORDER BY 1")]


def lefts(a: Approval) -> list[tuple[Any, Any]]:
    assert a.consequence is not None
    return [(c.before, c.after) for c in a.consequence.changes]


async def test_a_second_refund_between_approval_and_hand_over_is_caught_and_asked_again(
    store: Store, shop: ModuleType
) -> None:
    svc = ApprovalService.from_config(checked_example(), store=store, clock=FakeClock())
    asking = asyncio.create_task(Approvals(svc).ask("refund", dict(REFUND), session="chat-1"))
    first = await next_pending(store, "refund", besides=set())
    assert lefts(first) == [(1299.0, 1179.0), (0.0, 120.0)]  # left on the order; refunded to C-1042, before -> after
    shop.refund(order_id="78291", amount=100, customer_id="C-1042", idempotency_key="elsewhere")  # lands meanwhile
    await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))

    again = await next_pending(store, "refund", besides={first.id})

    async def drifted() -> list[tuple[str, str]]:  # audited once the drifted approval is superseded by the new one
        events = [(e.event, e.outcome) for e in await store.audit.entries(approval_id=first.id)]
        return events if ("consequence_drifted", "asked_again") in events else []

    events = await eventually(drifted, what="the drift audited", interval=0.005)
    assert not asking.done()  # nothing was handed over: the caller waits on the approval asking again
    assert again.drift is not None and (again.drift.of, again.drift.count) == (first.id, 1)
    assert again.drift.seen == first.consequence and lefts(again) == [(1199.0, 1079.0), (100.0, 220.0)]
    assert again.args == first.args and again.supersedes == first.id
    old = await store.approvals.get(first.id)
    assert (old.status, old.superseded_by) == (Status.SUPERSEDED, again.id)
    assert svc.present(old).outcome == (
        f"Approved, then what will happen changed before it ran: nothing ran, asked again as {again.id}"
    )
    assert ("executing", "ok") not in events
    view = svc.present(again)
    blocks = card(again, now=0.0, view=view)
    ids = [b.get("block_id") for b in blocks]
    assert ids.index(DRIFT) < ids.index(CONSEQUENCE + "_seen") < ids.index(CONSEQUENCE)
    home = home_view("U_SUPPORT1", waiting=[Waiting(again, None)], more_waiting=False, decided=[], grants=[], now=0.0)
    assert ":warning: Asked again: what will happen changed after approval (drift 1)" in str(home["blocks"])
    page = decision_page(again, view, reviewer="U_SUPPORT1", csrf="c", can_decide=True)
    assert "What was approved" in page and "drift 1 of 3" in page and "1299.0 → 1179.0" in page
    shown = ApprovalView.of(again, view)
    assert shown.drift is not None and shown.drift["seen"]["sha256"] == first.consequence.digest()
    assert view.canonical()["drift"]["seen_sha256"] == first.consequence.digest()

    await svc.decide(DecideRequest(again.id, "U_SUPPORT1", DecisionKind.APPROVE))
    answer = await asyncio.wait_for(asking, 60)
    assert answer.approved and answer.approval is not None and answer.approval.id == again.id
    assert refunds(shop) == [("elsewhere", 100.0)]  # ask hands the call over; the caller's refund is its own


async def test_two_callers_on_one_drifted_approval_get_one_hand_over(store: Store, shop: ModuleType) -> None:
    svc = ApprovalService.from_config(checked_example(), store=store, clock=FakeClock())
    agent = Approvals(svc)
    both = [asyncio.create_task(agent.ask("refund", dict(REFUND), session="chat-2")) for _ in range(2)]
    first = await next_pending(store, "refund", besides=set())
    shop.refund(order_id="78291", amount=100, customer_id="C-1042", idempotency_key="elsewhere")
    await svc.decide(DecideRequest(first.id, "U_SUPPORT1", DecisionKind.APPROVE))
    again = await next_pending(store, "refund", besides={first.id})
    await svc.decide(DecideRequest(again.id, "U_SUPPORT1", DecisionKind.APPROVE))
    answers = await asyncio.wait_for(asyncio.gather(*both), 60)
    assert sorted(a.status for a in answers) == ["approved", "handed_elsewhere"]
    asked = [a for a in (await store.approvals.list_pending()).items if a.tool == "refund"]
    assert asked == []  # one re-ask between them, none left behind
    drifts = [e for e in await store.audit.entries(approval_id=first.id) if e.event == "consequence_drifted"]
    assert len(drifts) == 1


async def test_a_workflow_run_pauses_again_on_drift_and_refunds_once(tmp_path: Path, shop: ModuleType) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'run.db'}")
    try:
        svc = ApprovalService.from_config(checked_example(), store=store, clock=FakeClock())
        runner = Runner(svc)
        r = await runner.start(load_workflow(EXAMPLE / "workflow.yaml"), {"order_id": "78291", "amount": "120"})
        assert r.status is RunStatus.PAUSED and r.approval is not None
        shop.refund(order_id="78291", amount=100, customer_id="C-1042", idempotency_key="elsewhere")
        await svc.decide(DecideRequest(r.approval.id, "U_SUPPORT1", DecisionKind.APPROVE), resume=False)
        paused = await runner.resume(r.session_id)
        assert paused.status is RunStatus.PAUSED and paused.approval is not None
        assert paused.approval.id != r.approval.id and paused.approval.drift is not None
        assert refunds(shop) == [("elsewhere", 100.0)]  # nothing ran
        await svc.decide(DecideRequest(paused.approval.id, "U_SUPPORT1", DecisionKind.APPROVE), resume=False)
        done = await runner.resume(r.session_id)
        assert done.status is RunStatus.COMPLETED
        ran = refunds(shop)
        assert len(ran) == 2 and ("elsewhere", 100.0) in ran and sum(a for _, a in ran) == 220.0
    finally:
        await store.close()


async def test_three_drifts_in_a_row_expire_it_as_drifted_and_nothing_runs(store: Store) -> None:
    ticks.TICKS.update(n=0, fail_from=None)
    svc = ApprovalService.from_config(parse_config(TICKING), store=store, clock=FakeClock())
    ran: list[int] = []

    @Approvals(svc).guard("pay", session="g")
    async def pay(amount: int) -> int:
        ran.append(amount)
        return amount

    paying = asyncio.create_task(pay(5))
    seen: set[str] = set()
    for round_ in range(3):
        a = await next_pending(store, "pay", besides=seen)
        assert (a.drift.count if a.drift else 0) == round_
        seen.add(a.id)
        await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE))
    with pytest.raises(ActionRejected) as refused:
        await asyncio.wait_for(paying, 60)
    assert refused.value.context["status"] == "expired" and "drifted" in refused.value.message
    assert ran == []
    last = await store.approvals.get(a.id)
    assert last.status is Status.EXPIRED and (last.reason or "").startswith("drifted: ")
    assert (svc.present(last).outcome or "").startswith("Expired as drifted")
    outcomes = [
        e.outcome
        for i in sorted(seen)
        for e in await store.audit.entries(approval_id=i)
        if e.event == "consequence_drifted"
    ]
    assert sorted(outcomes) == ["asked_again", "asked_again", "expired"]


async def test_an_ignored_field_is_no_drift_and_a_check_that_fails_runs_nothing(store: Store) -> None:
    ticks.TICKS.update(n=0, fail_from=None)
    svc = ApprovalService.from_config(parse_config(TICKING), store=store, clock=FakeClock())
    agent = Approvals(svc)
    same = asyncio.create_task(agent.ask("pay", {"amount": 1, "same": True}, session="i"))
    a = await next_pending(store, "pay", besides=set())
    await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE))
    assert (await asyncio.wait_for(same, 60)).approved  # only generated_at moved: ignored
    assert ticks.TICKS["n"] == 2

    ticks.TICKS.update(fail_from=4)  # computed when asked (3); the check (4) fails
    failing = asyncio.create_task(agent.ask("pay", {"amount": 2, "same": True}, session="i"))
    b = await next_pending(store, "pay", besides={a.id})
    await svc.decide(DecideRequest(b.id, "U_SUPPORT1", DecisionKind.APPROVE))
    with pytest.raises(GateRefused) as refused:
        await asyncio.wait_for(failing, 60)
    assert refused.value.code is ErrorCode.CONSEQUENCE_UNCHECKED and "stays approved" in refused.value.message
    assert (await store.approvals.get(b.id)).status is Status.APPROVED  # not handed over, not re-asked
    events = [e.event for e in await store.audit.entries(approval_id=b.id)]
    assert "consequence_unchecked" in events and "executing" not in events


async def test_a_claim_taken_after_another_callers_drift_superseded_it_runs_nothing(store: Store) -> None:
    """The race the check alone cannot close: a caller whose check passed claims after another caller's drift
    superseded the approval. Its claim is let go unrun and it is told where the approval went."""
    ticks.TICKS.update(n=0, fail_from=None)
    svc = ApprovalService.from_config(parse_config(TICKING), store=store, clock=FakeClock())
    asked = await svc.propose(ProposeRequest("pay", {"amount": 3}, session_id="r"))
    assert asked.approval is not None
    approved = await svc.decide(DecideRequest(asked.approval.id, "U_SUPPORT1", DecisionKind.APPROVE))
    await store.approvals.transition(  # what the other caller's drift did, after this caller's check passed
        approved.id,
        target=Status.SUPERSEDED,
        expected_version=approved.version,
        actor="other",
        now=svc.clock.now(),
        superseded_by="apr_ELSEWHERE0",
    )
    ran: list[int] = []
    effects = Effects(store, svc.clock, "this-caller")  # no drift check: it passed before the other's drift
    tool = Tool("pay", lambda amount, idempotency_key: ran.append(amount), None)
    with pytest.raises(EngineError) as refused:
        await effects.execute(tool, {"amount": 3}, key=f"call:{approved.id}", approval=approved)
    assert (
        refused.value.code is ErrorCode.CONSEQUENCE_DRIFTED and refused.value.context["approval_id"] == "apr_ELSEWHERE0"
    )
    assert ran == []
    claim = await store.ledger.get(f"call:{approved.id}")
    assert claim is not None and claim.state is ClaimState.FAILED and "not run" in str(claim.result)
