"""Practice approvals (``oversight.practice``), on both stores: a real approval now and then gets a practice twin
with one planted defect, posted to the same reviewers and looking like any other; nothing ever executes it; once decided
(a quorum included) the decider alone is told it was practice and whether they caught the defect; it counts only
in the practice figures."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import pytest

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE
from hitl.demo.refund.tools import connect
from hitl.engine.agents.ask import Approvals
from hitl.engine.agents.gate import ToolGate
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.domain.tally import summarize
from hitl.engine.errors import EngineError, NotFound
from hitl.engine.runtime.compose import compose
from hitl.engine.storage import open_store
from hitl.engine.testing.conformance.adapters import PRACTICE_CONFIG
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import CONFIG, Harness, refund_harness_with, start, stop, workspace
from tests.refund_config import write_refund_config

h = refund_harness_with(PRACTICE_CONFIG)


async def real_and_twin(h: Harness, amount: int, session: str) -> tuple[Approval, Approval]:
    args = {"order_id": "78291", "customer_id": "C-1042", "amount": amount, "reason": "damaged"}
    p = await h.svc.propose(ProposeRequest("refund", args, session_id=session))
    assert p.approval is not None
    await h.settle()
    twins = [
        a for a in (await h.rt.store.approvals.list_pending(limit=200)).items if a.metadata.get("of") == p.approval.id
    ]
    assert len(twins) == 1
    return p.approval, twins[0]


async def test_a_practice_twin_looks_like_any_other_never_runs_and_tells_the_decider(
    h: Harness, clock: FakeClock
) -> None:
    real, twin = await real_and_twin(h, 120, "s1")
    assert (twin.tool, twin.required_role, twin.quorum, twin.args["amount"]) == ("refund", "support", 1, 9999)
    assert re.fullmatch(r"s\d", twin.session_id) and twin.session_id != real.session_id  # s1's form, not s1
    card = h.card_for(twin.id)
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "Refund USD 9,999.00 to “C-1042” for order “78291”" in shown  # its own sentence, like any other
    assert "practice" not in shown.lower() and "planted" not in shown and "seed" not in shown
    opens = [e.event for e in await h.rt.store.audit.entries(approval_id=twin.id)][:2]
    assert opens == [e.event for e in await h.rt.store.audit.entries(approval_id=real.id)][:2]
    assert opens == ["consequence", "created"]  # its consequence audited before it is stored, as a real one's

    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_APPROVE)).status == 200
    told = h.ephemeral("U_SUPPORT1")[-1].text
    assert told.startswith(":mortar_board: That was a practice check") and "the defect was missed" in told
    assert "far above the order" in told and not h.ephemeral("U_SUPPORT2")  # the decider alone

    with pytest.raises(NotFound):  # an agent waiting on a twin learns nothing: as for no approval at all
        await Approvals(h.svc).wait(await h.rt.store.approvals.get(twin.id), wait=1)
    gate = ToolGate(h.svc, worker_id="agent")  # nothing executes a practice approval, whatever holds it
    ticket = await gate.ticket_of(await h.rt.store.approvals.get(twin.id))
    for attempt in (gate.begin(ticket), gate.execute(ticket, lambda **kw: "ran")):
        with pytest.raises(EngineError, match="practice approval"):
            await attempt

    other, caught = await real_and_twin(h, 60, "s2")
    await h.slack.command("U_SUPPORT2", "general", f"reject {caught.id} that amount is wrong")
    told = h.ephemeral("U_SUPPORT2")[-1].text
    assert "That was a practice check" in told and "You caught it." in told
    assert (await h.rt.store.approvals.get(caught.id)).status is Status.REJECTED

    big, quorum = await real_and_twin(h, 900, "s3")  # escalated: two finance approvers, the twin too
    assert (quorum.required_role, quorum.quorum) == ("finance", 2)
    await h.slack.click("U_FIN1", copy.deepcopy(h.card_for(quorum.id)), ACTION_APPROVE)
    assert not h.ephemeral("U_FIN1")  # a first vote of two: nothing told before the end
    assert len((await h.rt.store.approvals.get(quorum.id)).approvers) == 1
    await h.settle()  # the card shows the first vote
    await h.slack.click("U_FIN2", copy.deepcopy(h.card_for(quorum.id)), ACTION_APPROVE)
    assert "That was a practice check" in h.ephemeral("U_FIN2")[-1].text

    await h.rt.store.tallies.flush()
    now = clock.now()
    [row] = [r for r in summarize(await h.rt.store.tallies.read(since=now - 86400, now=now + 1)) if r.tier == "approve"]
    assert (
        row.counts.get("asked"),
        row.counts.get("practice"),
        row.counts.get("practice_caught"),
        row.counts.get("practice_missed"),
    ) == (
        2,
        2.0,
        1.0,
        1.0,
    )
    assert row.catch_rate == 0.5 and not row.counts.get("approved")  # practice counts in no other measure


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_twin_waits_for_its_moment_unseen_and_the_serve_running_then_creates_it(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Posted right beside its real card, a twin would be easy to tell apart: it waits a random share of
    ``oversight.practice.delay``, durably and unseen (nothing lists it, nothing posts it), and a restart of `hitl
    serve` meanwhile loses nothing: the server running when its moment has come creates it then (created at that
    moment, expiring its real one's timeout after it) and posts its card, once."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    config = tmp_path / "later.yaml"
    write_refund_config(config, CONFIG.read_text() + PRACTICE_CONFIG.replace("delay: 0", "delay: 10m"))
    url, state = fresh_store_url(backend, request, tmp_path, tag="later"), workspace()
    h = await start(open_store(url), clock, config=config, state=state, replica="before")
    h.rt.twins.lease = 0.0  # a twin not yet due is looked at again on the next round (Redis: its server's clock)
    try:
        args = {"order_id": "78291", "customer_id": "C-1042", "amount": 120, "reason": "damaged"}
        p = await h.svc.propose(ProposeRequest("refund", args, session_id="s-later"))
        real = p.approval
        assert real is not None
        await h.rt.background.tick()  # its moment has not come: the round leaves it waiting
        await h.settle()
        assert [a.id for a in (await h.rt.store.approvals.list_pending(limit=200)).items] == [real.id]
        assert [m.ts for m in h.cards()] == [h.card_for(real.id).ts]
    finally:
        await stop(h)

    clock.advance(600)  # the longest a twin waits
    h = await start(open_store(url), clock, config=config, state=state, replica="after")
    h.rt.twins.lease = 0.0
    try:
        for _ in range(2):  # planted by the first round, and only once
            await h.rt.background.tick()
            await h.settle()
        [twin] = [a for a in (await h.rt.store.approvals.list_pending(limit=200)).items if a.id != real.id]
        assert twin.metadata["of"] == real.id and twin.args["amount"] == 9999
        assert twin.created_at == clock.now() and twin.expires_at - twin.created_at == real.expires_at - real.created_at
        assert h.card_for(twin.id) and len(h.cards()) == 2  # posted like any other card, the real one not again
    finally:
        await stop(h)


async def test_practice_twins_group_with_the_real_ones_and_a_group_decision_tells_the_decider_alone(
    h: Harness,
) -> None:
    """Twins go on the same group card as the real approvals they copy (nothing tells them apart); Approve all
    decides them too, nothing of theirs runs, and only the decider learns how many were practice."""
    agent = compose(store=h.rt.store, clock=h.clock, config_path=str(h.rt.config_path)).service  # no Slack
    reals = []
    for i in range(3):
        args = {"order_id": f"7840{i}", "customer_id": f"C-20{i}", "amount": 30 + i, "reason": "damaged"}
        p = await agent.propose(ProposeRequest("refund", args, session_id=f"ses_pt{i}", requester="agent:riley"))
        assert p.approval is not None
        reals.append(p.approval)
    pending = (await h.rt.store.approvals.list_pending(limit=200)).items
    twins = [a for a in pending if a.metadata.get("of") in {r.id for r in reals}]
    assert len(twins) == 3
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    [card] = [m for m in h.cards() if " × refund from " in m.text]
    assert card.text == "6 × refund from agent:riley: 6 of 6 need approval"
    assert "practice" not in json.dumps(card.blocks).lower()
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    told = h.ephemeral("U_SUPPORT1")[-1].text
    assert "Approved 6 of 6." in told and "3 of them were practice requests: nothing ran for those." in told
    assert not h.ephemeral("U_SUPPORT2")
    for a in reals + twins:
        assert (await h.rt.store.approvals.get(a.id)).status is Status.APPROVED
    gate = ToolGate(h.svc, worker_id="agent")
    for twin in twins:  # approved as part of a group, a twin still never runs
        ticket = await gate.ticket_of(await h.rt.store.approvals.get(twin.id))
        with pytest.raises(EngineError, match="practice approval"):
            await gate.begin(ticket)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_twin_shows_and_audits_the_consequence_of_its_own_arguments(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A twin carrying its real approval's consequence (computed for other arguments), or lacking the
    ``consequence`` entry a real approval's audit opens with, would be told apart: drawn, its consequence is
    computed for its own arguments under the tool's bounds, and recorded when it is planted, as created then."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    connect().close()  # the shop with its orders: each refund's consequence reads what is left on its order
    config = tmp_path / "later.yaml"
    write_refund_config(config, CONFIG.read_text() + PRACTICE_CONFIG.replace("delay: 0", "delay: 10m"))
    h = await start(open_store(fresh_store_url(backend, request, tmp_path, tag="csq")), clock, config=config)
    h.rt.twins.lease = 0.0
    try:
        args = {"order_id": "78291", "customer_id": "C-1042", "amount": 120, "reason": "damaged"}
        p = await h.svc.propose(ProposeRequest("refund", args, session_id="s-csq"))
        real = p.approval
        assert real is not None and real.consequence is not None
        assert real.consequence.summary == "Order 78291 keeps 1179.00 of 1299.00 refundable after this refund"
        clock.advance(600)  # the longest a twin waits
        await h.rt.background.tick()
        await h.settle()
        [twin] = [a for a in (await h.rt.store.approvals.list_pending(limit=200)).items if a.id != real.id]
        assert twin.metadata["of"] == real.id and twin.args["amount"] == 9999
        assert twin.consequence is not None and twin.consequence.outcome is real.consequence.outcome
        mine = "Refunding 9999.00 will fail: only 1299.00 is left to refund on order 78291"
        assert twin.consequence.summary == mine  # its own arguments', not its real one's
        shown = json.dumps(h.card_for(twin.id).blocks, ensure_ascii=False)
        assert mine in shown and real.consequence.summary not in shown

        told = {a.id: await h.rt.store.audit.entries(approval_id=a.id) for a in (real, twin)}
        assert [e.event for e in told[twin.id]] == [e.event for e in told[real.id]]
        assert [e.event for e in told[twin.id]][:2] == ["consequence", "created"]
        for a in (real, twin):
            [entry] = [e for e in told[a.id] if e.event == "consequence"]
            digest = hashlib.sha256(json.dumps(a.args, sort_keys=True, default=str).encode()).hexdigest()
            assert entry.detail.startswith(f"refund: args sha256 {digest}; ")
            assert (entry.at, entry.actor, entry.version, entry.action_hash, entry.outcome) == (
                a.created_at,
                a.requester,
                1,
                a.action_hash,
                str(a.consequence.outcome if a.consequence else None),
            )
    finally:
        await stop(h)
