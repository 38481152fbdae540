"""The stop switch through Slack and the run lifecycle, on both stores: only the admin role halts; while halted the
cards say so and offer only Reject, a click on Approve is refused, a run pauses at its next step that uses the tool
(even one approved before the halt), and the Home tab shows it; unhalting resumes those runs, each effect once."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.bot.views.blocks import HALTED
from hitl.bot.views.controls import ACTION_APPROVE, ACTION_REJECT
from hitl.bot.views.home import HOME_HALTED
from hitl.demo.examples import refund_example
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.backends import BACKENDS
from tests.bot.conftest import CONFIG, Harness, harness_on

ADMIN = "U_ADMIN1"


@pytest.fixture(params=BACKENDS)
async def h(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    config = CONFIG.read_text().replace("roles:\n", f"roles:\n  admin: [{ADMIN}]\n", 1)
    async with harness_on(request, tmp_path, clock, config) as harness:
        harness.state.users[ADMIN] = {"name": "admin1", "real_name": "Admin One", "tz": "UTC"}
        yield harness


async def run_refund(h: Harness, amount: int, order: str) -> object:
    return await h.rt.lifecycle.start(
        load_workflow(refund_example() / "workflow.yaml"), {"order_id": order, "amount": str(amount), "note": "n"}
    )


def reply(h: Harness, user: str) -> str:
    return h.ephemeral(user)[-1].text


def refunds(tmp: Path) -> int:
    import sqlite3

    db = Path(str(tmp))
    if not db.exists():
        return 0
    with sqlite3.connect(db) as c:
        return int(c.execute("SELECT count(*) FROM refunds").fetchone()[0])


async def test_halting_from_slack_stops_cards_clicks_and_runs_until_unhalted(h: Harness, tmp_path: Path) -> None:
    shop = tmp_path / "shop.db"
    first = await run_refund(h, 120, "78291")
    assert first.approval is not None  # type: ignore[attr-defined]
    a = first.approval  # type: ignore[attr-defined]
    await h.settle()
    old_card = copy.deepcopy(h.card_for(a.id))

    await h.slack.command("U_SUPPORT1", "general", "halt refund because")
    assert "Only the `admin` role may halt" in reply(h, "U_SUPPORT1")
    assert await h.rt.store.halts.active() == []
    await h.slack.command(ADMIN, "general", "halt refund refunds look wrong")
    assert "Halted `refund`" in reply(h, ADMIN)
    await h.settle()
    card = h.card_for(a.id)
    notice = next(b for b in card.blocks if b.get("block_id") == HALTED)["text"]["text"]
    assert "stopped by <@U_ADMIN1>: refunds look wrong" in notice and "Reject still works" in notice
    [controls] = [b for b in card.blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in controls["elements"]] == [ACTION_REJECT]  # only Reject while halted

    await h.slack.click("U_SUPPORT1", old_card, ACTION_APPROVE)  # the card as it was before the halt
    assert "Not approved: halted by U_ADMIN1: refunds look wrong" in reply(h, "U_SUPPORT1")
    assert (await h.rt.store.approvals.get(a.id)).status is Status.PENDING

    second = await run_refund(h, 60, "78300")
    assert second.status is RunStatus.PAUSED and second.approval is None  # type: ignore[attr-defined]
    assert str(second.reason).startswith("halted: halted by U_ADMIN1")  # type: ignore[attr-defined]

    r = await h.slack.home_opened("U_SUPPORT1")
    assert r.status == 200
    await h.rt.ctx.home.settled()
    home = [
        b["text"]["text"]
        for b in h.state.homes["U_SUPPORT1"]["blocks"]
        if str(b.get("block_id", "")).startswith(HOME_HALTED)
    ]
    assert home and "stopped by <@U_ADMIN1>" in home[0]

    await h.slack.command("U_SUPPORT2", "general", "halts")
    assert "`refund` by <@U_ADMIN1>" in reply(h, "U_SUPPORT2")
    await h.slack.command(ADMIN, "general", "unhalt refund")
    assert "`refund` is no longer halted. 1 paused run(s) go on." in reply(h, ADMIN)
    await h.rt.lifecycle.process_jobs()
    await h.settle()
    resumed = await h.rt.store.runs.load(second.session_id)  # type: ignore[attr-defined]
    assert resumed is not None and resumed.status == "paused" and resumed.data.get("waiting")  # now on its approval
    assert not any(b.get("block_id") == HALTED for b in h.card_for(a.id).blocks)
    await h.slack.click("U_SUPPORT1", h.card_for(a.id), ACTION_APPROVE)
    await h.rt.lifecycle.process_jobs()
    await h.settle()
    assert (await h.rt.store.approvals.get(a.id)).status is Status.EXECUTED
    assert refunds(shop) == 1

    trail = [e for e in await h.rt.store.audit.entries(limit=2000)]
    assert [(e.event, e.actor) for e in trail if e.event in ("halted", "unhalted")] == [
        ("halted", ADMIN),
        ("unhalted", ADMIN),
    ]
    assert any(e.event == "refused" and e.actor == "U_SUPPORT1" and e.outcome == "not_eligible" for e in trail)
    assert any(e.event == "refused" and e.outcome == "halted" for e in trail)


async def test_a_run_approved_before_the_halt_waits_for_the_unhalt_and_runs_once(h: Harness, tmp_path: Path) -> None:
    shop = tmp_path / "shop.db"
    run = await run_refund(h, 120, "78291")
    a = run.approval  # type: ignore[attr-defined]
    assert a is not None
    # Approved, and the run not yet continued (a server would continue it in a moment): then the halt.
    await h.rt.lifecycle.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE), resume="none")
    await h.rt.lifecycle.halt(None, by=ADMIN, reason="stop everything")
    await h.rt.lifecycle.resume(run.session_id, actor="test")  # type: ignore[attr-defined]
    paused = await h.rt.store.runs.load(run.session_id)  # type: ignore[attr-defined]
    assert paused is not None and paused.status == "paused" and str(paused.data["reason"]).startswith("halted:")
    assert refunds(shop) == 0  # approved, but nothing runs while halted
    lifted, resumed = await h.rt.lifecycle.unhalt(None, by=ADMIN)
    assert lifted is not None and resumed == 1
    await h.rt.lifecycle.process_jobs()
    done = await h.rt.store.runs.load(run.session_id)  # type: ignore[attr-defined]
    assert done is not None and done.status == "completed"
    assert refunds(shop) == 1
