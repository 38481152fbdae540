"""Interrupt mode (a decision in Slack resumes the paused run), the sweeper, batches."""

from __future__ import annotations

import copy
import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_VIEW_ALL
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import StoreError
from hitl.engine.subscribers.events import FYI_JOB
from hitl.engine.workflow.definition import load_workflow
from tests.bot.conftest import ROOT, Harness
from tests.slack_text import parsed_text

REFUND = ROOT / "examples" / "refund" / "workflow.yaml"
CONFIG = ROOT / "examples" / "refund" / "hitl.yaml"


async def test_slack_approval_resumes_the_paused_run_exactly_once(harness: Harness, tmp_path: Path) -> None:
    runner = harness.rt.runtime.contexts.for_workflow(load_workflow(REFUND)).runner
    r = await runner.start(
        load_workflow(REFUND), {"order_id": "78291", "amount": "120", "note": "box crushed"}, config_path=str(CONFIG)
    )
    assert r.status is RunStatus.PAUSED and r.approval is not None
    await harness.settle()  # the card is posted by the bot's worker: the run never waits on Slack
    card = copy.deepcopy(harness.card_for(r.approval.id))
    await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    assert await harness.rt.lifecycle.process_jobs() == 1
    await harness.settle()
    state = await runner.load(r.session_id)
    assert state.status is RunStatus.COMPLETED
    done = await harness.svc.store.approvals.get(r.approval.id)
    assert done.status is Status.EXECUTED
    assert "Approved and done" in harness.card_for(r.approval.id).blocks[0]["text"]["text"]
    thread = [m for m in harness.state.messages if m.thread_ts == card.ts]
    assert thread and "completed" in thread[-1].text
    with sqlite3.connect(tmp_path / "shop.db") as db:
        assert db.execute("SELECT amount FROM refunds").fetchall() == [(120.0,)]
    # a replayed click and a second worker pass change nothing
    await harness.slack.click("U_SUPPORT2", card, ACTION_APPROVE)
    assert await harness.rt.lifecycle.process_jobs() == 0
    with sqlite3.connect(tmp_path / "shop.db") as db:
        assert len(db.execute("SELECT * FROM refunds").fetchall()) == 1


async def test_sweeper_reminds_once_then_expires_and_updates_the_card(harness: Harness) -> None:
    p = await harness.svc.propose(
        ProposeRequest("refund", {"order_id": "1", "customer_id": "C-1", "amount": 20}, session_id="sw")
    )
    assert p.approval is not None
    card = harness.card_for(p.approval.id)
    harness.clock.advance(4 * 3600 - 300)  # 5 minutes left; reminders go 10 minutes before expiry
    await harness.rt.background.tick()
    await harness.rt.background.tick()
    reminders = [m for m in harness.state.messages if m.thread_ts == card.ts]
    assert len(reminders) == 1 and "expires" in reminders[0].text
    harness.clock.advance(301)
    await harness.rt.background.tick()
    await harness.settle()
    assert (await harness.svc.store.approvals.get(p.approval.id)).status is Status.EXPIRED
    top = harness.card_for(p.approval.id)
    assert top.blocks[0]["text"]["text"].startswith("Expired") and "without a decision" in json.dumps(top.blocks)
    assert not any(b["type"] == "actions" for b in top.blocks)


async def test_batch_card_shows_count_digest_and_view_all(harness: Harness) -> None:
    items = [{"to": f"user{i}@example.com", "subject": "s", "body": "b"} for i in range(12)]
    p = await harness.svc.propose(ProposeRequest("send_email_batch", {}, session_id="b", batch=items))
    assert p.approval is not None
    card = copy.deepcopy(harness.card_for(p.approval.id))
    text = json.dumps(card.blocks)
    assert "Batch of 12" in text and p.approval.action_hash[:16] in text and "user0@example.com" in text
    assert "user11@example.com" not in text
    await harness.slack.click("U_SUPPORT1", card, ACTION_VIEW_ALL)
    view = list(harness.state.views.values())[-1]
    assert "user11@example.com" in json.dumps(view["blocks"])


async def test_a_decision_queues_its_runs_resume_in_the_same_step(harness: Harness, tmp_path: Path) -> None:
    """Decided through the service alone, as a process that dies right after the store's step would leave it: the
    run's resume was queued in that same step, so nothing has to scan paused runs to find it."""
    runner = harness.rt.runtime.contexts.for_workflow(load_workflow(REFUND)).runner
    r = await runner.start(load_workflow(REFUND), {"order_id": "78291", "amount": "40"}, config_path=str(CONFIG))
    assert r.approval is not None
    assert await harness.svc.store.runs.paused() == [r.session_id]
    await harness.svc.decide(DecideRequest(r.approval.id, "U_SUPPORT1", DecisionKind.APPROVE))
    assert await harness.rt.lifecycle.recover() == 0  # only runs whose owner died are recovered
    assert await harness.rt.lifecycle.process_jobs() == 1
    assert await harness.rt.lifecycle.process_jobs() == 0
    assert (await runner.load(r.session_id)).status is RunStatus.COMPLETED
    assert await harness.svc.store.runs.paused() == []
    with sqlite3.connect(tmp_path / "shop.db") as db:
        assert db.execute("SELECT amount FROM refunds").fetchall() == [(40.0,)]


async def test_a_notify_call_from_a_process_without_slack_gets_its_fyi_from_the_sweep(harness: Harness) -> None:
    # An agent process (no notifier) runs a NOTIFY-tier tool: it runs at once, and `hitl serve` posts the FYI.
    policy = parse_config("policy: {tools: {ping: {tier: notify}}}").build_policy()
    agent = dataclasses.replace(harness.service, notifier=None, policy=policy)
    proposal = await agent.propose(ProposeRequest("ping", {"to": "<!channel> *urgent*"}, session_id="agent-7"))
    assert proposal.may_run
    trail = await harness.svc.store.audit.entries()
    assert [e.detail for e in trail if e.event == "notified"] == [
        "agent-7: ping ran with an FYI to reviewers (ping: tool policy sets notify)"
    ]
    await harness.rt.ctx.notifier.sweep()
    await harness.rt.ctx.notifier.sweep()  # posted once, not once per sweep
    await harness.settle()
    fyis = [m for m in harness.state.messages if m.text == "ping ran without review"]
    channel = harness.state.channel("refund-approvals")
    assert channel is not None and len(fyis) == 1 and fyis[0].channel == channel.id
    rendered = json.dumps(fyis[0].blocks, ensure_ascii=False)
    assert "<!channel>" not in parsed_text(fyis[0].blocks) and "ping: tool policy sets notify" in rendered
    [box] = [b for b in fyis[0].blocks if b.get("block_id") == "hitl_fyi_args"]  # the arguments, as they ran
    assert box["elements"][0]["elements"][0]["text"] == '{\n "to": "<!channel> *urgent*"\n}'


async def test_a_notify_call_goes_ahead_only_once_its_fyi_is_queued(harness: Harness) -> None:
    """The FYI is a durable job written before the call's go (with its audit entry): a store that cannot take it
    stops the call, and nothing says it ran."""
    policy = parse_config("policy: {tools: {ping: {tier: notify}}}").build_policy()
    agent = dataclasses.replace(harness.service, notifier=None, policy=policy)
    await agent.propose(ProposeRequest("ping", {"to": "ops"}, session_id="agent-8"))
    [job] = await harness.svc.store.jobs.claim("t", kind=FYI_JOB, limit=5, now=harness.clock.now(), lease=60)
    assert job.payload["tool"] == "ping" and job.payload["session_id"] == "agent-8"  # queued before propose returned
    await harness.svc.store.jobs.ack(job.id)
    jobs = harness.svc.store.jobs
    enqueue = jobs.enqueue

    async def refused(*args: Any, **kwargs: Any) -> str:
        raise StoreError("the job queue is away")

    jobs.enqueue = refused
    try:
        with pytest.raises(StoreError):
            await agent.propose(ProposeRequest("ping", {"to": "ops"}, session_id="agent-9"))
    finally:
        jobs.enqueue = enqueue
