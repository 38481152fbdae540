"""A Modify's consequence in the process that holds the tool: computed again for the edited arguments (what will
run), under the same bounds and audited; kept on the decision when the edit is approved as it stands (the view,
the card and the receipt then carry it), and asked with on the approval that replaces it when the edit needs other
approvers, as a fresh proposal is. A consequence given in Python in another process is said to be unavailable,
never shown for arguments it was not computed for. On SQLite and Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.consequence_tools as tools
from hitl.bot.views.blocks import card
from hitl.bot.views.consequence import CONSEQUENCE
from hitl.engine.agents.ask import Approvals
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.consequences import ConsequenceOutcome
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.ports import Store
from hitl.engine.receipts.claims import receipt_claims
from hitl.engine.service import AnswerWindow, ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.backends import fresh_store_url
from tests.bot.test_hostile_text import texts
from tests.waiting import eventually

YAML = (
    """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2], finance: [U_FIN1, U_FIN2]}
policy:
  tools:
"""
    + tools.BOUNDED_REFUND
    + """    checked_refund: {role: support, consequence: "tests.consequence_tools:refund", consequence_check: true}
    slow_refund: {role: support, consequence: "tests.consequence_tools:refund", consequence_limits: {timeout: 10s}}
  rules:
    - {name: large_refund, tools: [refund], when: "args.amount > 500", tier: escalate, role: finance, quorum: 2}
"""
)
CONFIG = parse_config(YAML)


@pytest.fixture(params=("sqlite", "redis"))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="csqedit"))
    yield s
    await s.close()


async def _pending(store: Store, tool: str, **args: Any) -> Any:
    async def found() -> Any:
        items = (await store.approvals.list_pending()).items
        return next((a for a in items if a.tool == tool and args.items() <= a.args.items()), None)

    return await eventually(found, what=f"a pending {tool} {args}", interval=0.005)


async def _audited(store: Store, approval_id: str) -> list[tuple[str, str]]:
    entries = await store.audit.entries(approval_id=approval_id)
    return [(e.outcome, e.detail.split(";")[0]) for e in entries if e.event == "consequence"]


async def test_an_approved_edit_shows_and_signs_the_consequence_of_the_edited_arguments(
    store: Store, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    tools.RAN.clear()
    task = asyncio.create_task(Approvals(svc).ask("refund", {"order_id": "A1", "amount": 30}, session="s"))
    a = await _pending(store, "refund")
    assert a.consequence.summary == "Order A1 keeps 170.00 refundable"
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 80}))
    assert (await task).approved and done.status is Status.APPROVED
    assert tools.RAN == [{"order_id": "A1", "amount": 30}, {"order_id": "A1", "amount": 80}]
    read = await store.approvals.get(a.id)  # as stored, on either store
    assert read.consequence == a.consequence  # what the reviewer was shown when they decided stays recorded
    will = read.will_happen
    assert will is not None and will.summary == "Order A1 keeps 120.00 refundable", will
    assert read.decisions[-1].consequence == will
    assert CONFIG.present(read).canonical()["consequence"] == {"outcome": "shown", "sha256": will.digest()}
    blocks = card(read, now=clock.now())  # the decided card says what the edited call does
    box = "".join(texts(next(b for b in blocks if b.get("block_id") == CONSEQUENCE)))
    assert box.startswith("Order A1 keeps 120.00 refundable\nrefundable: 200.0 → 120.0"), box
    claims = receipt_claims(read, args=read.execute_args, issuer="https://x", now=clock.now(), ttl=60)
    assert claims["consequence_sha256"] == will.digest() != a.consequence.digest()
    assert [o for o, _ in await _audited(store, a.id)] == ["shown", "shown"]  # computed twice, audited twice


async def test_an_edit_that_needs_other_approvers_asks_them_with_its_own_consequence(
    store: Store, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    task = asyncio.create_task(Approvals(svc).ask("refund", {"order_id": "B1", "amount": 30}, session="s"))
    a = await _pending(store, "refund")
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 600}))
    assert done.status is Status.SUPERSEDED and done.superseded_by is not None
    new = await store.approvals.get(done.superseded_by)
    assert new.supersedes == a.id and new.quorum == 2
    c = new.consequence
    assert c is not None and c.outcome is ConsequenceOutcome.SHOWN, c
    assert c.summary == "Order B1 keeps -400.00 refundable"  # of what it asks, not of the original 30
    assert CONFIG.present(new).canonical()["consequence"]["sha256"] == c.digest()
    assert await _audited(store, new.id) == [("shown", f"refund: args sha256 {_sha(new.args)}")]
    task.cancel()


async def test_an_edit_is_bounded_as_a_proposal_is(store: Store, clock: FakeClock) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    task = asyncio.create_task(Approvals(svc).ask("refund", {"order_id": "C1", "amount": 30}, session="s"))
    a = await _pending(store, "refund")
    edit = {"reason": "sleep"}  # its consequence sleeps 60 s: the decision is recorded at the bound without it
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args=edit))
    assert done.status is Status.APPROVED and (await task).approved
    will = (await store.approvals.get(a.id)).will_happen
    assert will is not None and will.headline == "No consequence (timed out after 0.5 s)"


async def test_an_edit_where_a_surface_must_answer_in_time_is_recorded_in_time(store: Store, clock: FakeClock) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    task = asyncio.create_task(Approvals(svc).ask("slow_refund", {"order_id": "D1", "amount": 30}, session="s"))
    a = await _pending(store, "slow_refund")
    window = AnswerWindow(by=time.time() + 2.0)  # Slack's: the store refuses a decision that reaches it later
    edit = DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"reason": "sleep"})  # its bound is 10 s
    done = await svc.decide(edit, window=window)
    assert done.status is Status.APPROVED and window.recorded.done() and (await task).approved
    will = done.will_happen
    assert will is not None and will.outcome is ConsequenceOutcome.TIMED_OUT, will  # given half the window, no more


async def test_one_given_in_python_is_computed_for_the_edit_here_and_never_shown_stale_elsewhere(
    store: Store, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    agent = Approvals(svc)
    posts = lambda args: f"posts {args['text']!r}"  # noqa: E731
    here = asyncio.create_task(agent.ask("note", {"text": "hi"}, session="h", consequence=posts))
    a = await _pending(store, "note", text="hi")
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"text": "bye"}))
    assert (await here).approved and done.will_happen is not None and done.will_happen.summary == "posts 'bye'"
    there = asyncio.create_task(agent.ask("note", {"text": "yo"}, session="t", consequence=posts))
    b = await _pending(store, "note", text="yo")
    other = ApprovalService.from_config(CONFIG, store=store, clock=clock)  # another process: the callable is not in it
    done = await other.decide(DecideRequest(b.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"text": "later"}))
    assert (await there).approved
    will = (await store.approvals.get(b.id)).will_happen
    assert will is not None and will.outcome is ConsequenceOutcome.FAILED, will
    assert will.why.startswith("failed: this process cannot run the tool's consequence (given in Python to the")


def _sha(args: dict[str, Any]) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()


async def test_the_drift_check_after_a_modify_compares_with_the_consequence_of_the_edited_arguments(
    store: Store, clock: FakeClock
) -> None:
    """The deciders of an edit saw the edited arguments' consequence; the check before running computes it again for
    those same arguments, so an unchanged world runs the edit rather than asking again as drifted."""
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    tools.RAN.clear()
    task = asyncio.create_task(Approvals(svc).ask("checked_refund", {"order_id": "A1", "amount": 30}, session="s"))
    a = await _pending(store, "checked_refund")
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": 80}))
    assert done.status is Status.APPROVED

    async def settled() -> bool:
        pending = (await store.approvals.list_pending()).items
        return task.done() or any(p.tool == "checked_refund" for p in pending)

    await eventually(settled, what="the edit ran or was asked again", interval=0.005)
    assert task.done() and (await task).approved
    events = [e.event for e in await store.audit.entries(approval_id=a.id)]
    assert "consequence_drifted" not in events and "consequence_unchecked" not in events
