"""A tool's consequence in the process that holds the tool (the ask API, guard): computed only for calls that ask a
person, from a copy of the validated arguments, bounded, audited, stored with the approval (read back from the
store), its digest in the view a decision records; drawn as "What will happen" on the card, the decision page and
``hitl show``, where strings a consequence returns stay inert."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import tests.consequence_tools as tools
from hitl.bot.views.blocks import card
from hitl.bot.views.consequence import CONSEQUENCE, CONSEQUENCE_LABEL
from hitl.bot.views.home import Waiting, home_view
from hitl.engine.agents.ask import Approvals
from hitl.engine.agents.gate import ToolCall, ToolGate
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.consequences import ConsequenceOutcome
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.ports import Store
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from hitl.web.pages import decision_page
from tests.backends import fresh_store_url
from tests.bot.hostile import HOSTILE, carried
from tests.bot.test_hostile_text import assert_inert, texts
from tests.waiting import eventually
from tests.web.test_hostile_evidence import FOR_BROWSERS

YAML = (
    """
requester: agent:riley
roles: {support: [U_SUPPORT1, U_SUPPORT2]}
policy:
  allowed_tools: [look_up_order]
  denied_tools: [wipe]
  tools:
"""
    + tools.BOUNDED_REFUND
    + """    look_up_order: {consequence: "tests.consequence_tools:refund"}
    wipe: {consequence: "tests.consequence_tools:refund"}
"""
)
CONFIG = parse_config(YAML)
OWN_TAGS = {
    "<h2>",
    "</h2>",
    '<span class="untrusted">',
    "</span>",
    '<pre class="consequence-text">',
    "</pre>",
    '<p class="look-closely" role="note">',
    "</p>",
    "<b>",
    "</b>",
}


@pytest.fixture(params=("sqlite", "redis"))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s = open_store(fresh_store_url(request.param, request, tmp_path, tag="csq"))
    yield s
    await s.close()


async def pending(store: Store, tool: str) -> Any:
    async def found() -> Any:
        return next((a for a in (await store.approvals.list_pending()).items if a.tool == tool), None)

    return await eventually(found, what=f"a pending {tool}", interval=0.005)


async def test_computed_once_for_a_call_that_asks_stored_audited_and_in_the_recorded_view(
    store: Store, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    agent = Approvals(svc)
    tools.RAN.clear()
    assert (await agent.ask("look_up_order", {"order_id": "1"}, session="s")).approved  # allowed: never computed
    assert not (await agent.ask("wipe", {"all": True}, session="s")).approved  # denied: never computed
    assert tools.RAN == []
    args = {"order_id": "A1", "amount": 30, "reason": "mutate"}
    task = asyncio.create_task(agent.ask("refund", args, session="s"))
    a = await pending(store, "refund")
    assert tools.RAN == [{"order_id": "A1", "amount": 30, "reason": "mutate"}]
    assert a.args == {"order_id": "A1", "amount": 30, "reason": "mutate"}  # its copy was changed, not what runs
    c = a.consequence
    assert c is not None and c.outcome is ConsequenceOutcome.SHOWN, c
    assert c.summary == "Order changed keeps 200.00 refundable"  # what it computed from its (changed) copy

    async def audited() -> list[Any] | None:
        return [e for e in await store.audit.entries(approval_id=a.id) if e.event == "consequence"] or None

    audit = await eventually(audited, what="the consequence's audit entry", interval=0.005)
    assert [(e.outcome, e.detail.split(";")[0]) for e in audit] == [("shown", f"refund: args sha256 {_sha(args)}")]
    view = CONFIG.present(a)
    assert view.canonical()["consequence"] == {"outcome": "shown", "sha256": c.digest()}
    done = await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE, view_digest=view.digest()))
    assert (await task).approved and done.status is not Status.PENDING
    decided = [e for e in await store.audit.entries(approval_id=a.id) if e.event == "decided"]
    assert decided[0].view is not None and decided[0].view["consequence"]["sha256"] == c.digest()


def _sha(args: dict[str, Any]) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()


async def test_timed_out_busy_and_failed_are_asked_at_once_without_it(store: Store, clock: FakeClock) -> None:
    agent = Approvals(ApprovalService.from_config(CONFIG, store=store, clock=clock))
    released = threading.Event()

    def hangs(args: dict[str, Any]) -> object:
        released.wait()
        return "late"

    slow = asyncio.create_task(agent.ask("refund", {"order_id": "S", "amount": 1, "reason": "sleep"}, session="a"))
    first = await pending(store, "refund")  # its one worker still sleeps: the next is busy
    assert first.consequence is not None and first.consequence.headline == "No consequence (timed out after 0.5 s)"
    busy = asyncio.create_task(agent.ask("refund", {"order_id": "B", "amount": 2}, session="b"))
    second = await eventually(lambda: _by_order(store, "B"), what="the busy one", interval=0.005)
    assert second.consequence.headline == "No consequence (busy: 1 already running)"
    wrong = asyncio.create_task(agent.ask("note", {"text": "x"}, session="c", consequence=lambda _: 42))
    third = await pending(store, "note")  # given beside the tool in Python (no hitl.yaml consequence)
    assert third.consequence.headline == "No consequence (failed: returned int, not a str or a mapping with a summary)"
    hanging = asyncio.create_task(agent.ask("note", {"text": "y"}, session="d", consequence=hangs))
    fourth = await eventually(lambda: _by_arg(store, "text", "y"), what="the hanging one", interval=0.005)
    assert fourth.consequence.outcome is ConsequenceOutcome.TIMED_OUT  # the default bound (2 s): a thread
    released.set()
    for t in (slow, busy, wrong, hanging):
        t.cancel()

    async def outcomes() -> list[str] | None:
        found = sorted(e.outcome for e in await store.audit.entries(limit=100) if e.event == "consequence")
        return found if len(found) == 4 else None

    assert await eventually(outcomes, what="four audited") == ["busy", "failed", "timed_out", "timed_out"]


async def _by_order(store: Store, order: str) -> Any:
    return await _by_arg(store, "order_id", order)


async def _by_arg(store: Store, name: str, value: str) -> Any:
    return next((a for a in (await store.approvals.list_pending()).items if a.args.get(name) == value), None)


async def test_shown_as_what_will_happen_on_the_card_the_page_and_hitl_show(store: Store, clock: FakeClock) -> None:
    agent = Approvals(ApprovalService.from_config(CONFIG, store=store, clock=clock))
    task = asyncio.create_task(agent.ask("refund", {"order_id": "C7", "amount": 30}, session="s"))
    a = await pending(store, "refund")
    task.cancel()
    blocks = card(a, now=clock.now())
    ids = [b.get("block_id") for b in blocks]
    label = blocks[ids.index(CONSEQUENCE_LABEL)]["elements"][0]["text"]
    assert label.startswith(":crystal_ball: *What will happen* (computed by the tool's own code")
    box = "".join(texts(blocks[ids.index(CONSEQUENCE)]))
    assert box == 'Order C7 keeps 170.00 refundable\nrefundable: 200.0 → 170.0\norder: "C7" · refund: 30.0\n' + (
        "- balance 200.00\n+ balance 170.00"
    )
    page = decision_page(a, CONFIG.present(a), reviewer="U_SUPPORT1", csrf="x", can_decide=True)
    assert "<h2>What will happen <span" in page and "refundable: 200.0 → 170.0" in page
    assert "order: &quot;C7&quot; · refund: 30.0" in page


CORPUS = [s for s in (*HOSTILE, *FOR_BROWSERS) if carried(s)]  # a lone surrogate never gets this far
"""The card's hostile strings and the decision page's markup written for a browser."""


@pytest.mark.parametrize("hostile", CORPUS, ids=[f"h{i}" for i in range(len(CORPUS))])
async def test_hostile_strings_a_consequence_returns_stay_inert(hostile: str, clock: FakeClock, tmp_path: Path) -> None:
    config = parse_config(
        YAML.replace(
            'tests.consequence_tools:refund"\n      consequence_limits: {timeout: 0.5s, workers: 1}',
            'tests.consequence_tools:hostile"\n      consequence_limits: {timeout: 5s, max_bytes: 65536}',
        )
    )
    store = open_store(f"sqlite:///{tmp_path}/h.db")
    try:
        agent = Approvals(ApprovalService.from_config(config, store=store, clock=clock))
        task = asyncio.create_task(agent.ask("refund", {"note": hostile[:3000]}, session="h"))
        a = await pending(store, "refund")
        task.cancel()
    finally:
        await store.close()
    assert a.consequence is not None
    assert_inert(card(a, now=clock.now()))
    home = home_view("U_SUPPORT1", waiting=[Waiting(a, None)], more_waiting=False, decided=[], grants=[], now=0.0)
    assert_inert(home["blocks"])
    assert ":crystal_ball: What will happen: `" in home["blocks"][3]["text"]["text"]
    page = decision_page(a, config.present(a), reviewer="U_SUPPORT1", csrf="x", can_decide=True)
    section = page[page.index('<section class="consequence">') :]
    section = section[: section.index("</section>")]
    tags = set(re.findall(r"<[^>]*>", section))  # every element in it is the page's own
    assert tags <= {*OWN_TAGS, '<section class="consequence">'}, tags


async def test_a_flood_is_asked_at_once_without_waiting_on_a_consequence_that_hangs(
    store: Store, clock: FakeClock
) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    released = threading.Event()

    def hangs(args: dict[str, Any]) -> object:
        released.wait()
        return "late"

    try:
        asked = await asyncio.gather(
            *(svc.propose(ProposeRequest("note", {"n": i}, session_id=f"f{i}", consequence=hangs)) for i in range(200))
        )
    finally:
        released.set()
    outcomes = [p.approval.consequence.outcome for p in asked if p.approval and p.approval.consequence]
    # Four run (the default workers) and are asked at their bound; every other one at once, busy.
    assert sorted(outcomes).count(ConsequenceOutcome.BUSY) == 196 and len(outcomes) == 200
    assert outcomes.count(ConsequenceOutcome.TIMED_OUT) == 4


async def test_guard_and_a_tool_gate_take_one_beside_the_tool(store: Store, clock: FakeClock) -> None:
    svc = ApprovalService.from_config(CONFIG, store=store, clock=clock)
    gate = ToolGate(svc, consequences={"note": lambda args: f"posts {args['text']!r}"})
    ticket = await gate.check(ToolCall("note", {"text": "hi"}, session="g", framework="strands", call_id="c1"))
    assert ticket.approval is not None and ticket.approval.consequence is not None
    assert ticket.approval.consequence.summary == "posts 'hi'"
    agent = Approvals(svc)

    @agent.guard("note", session="h", consequence=lambda args: f"guarded {args['text']}")
    async def note(text: str) -> str:
        return text

    task = asyncio.create_task(note("yo"))
    a = await eventually(lambda: _by_arg(store, "text", "yo"), what="the guarded call", interval=0.005)
    task.cancel()
    assert a.consequence.summary == "guarded yo"
