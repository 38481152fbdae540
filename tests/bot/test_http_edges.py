"""Signatures, malformed input, Slack API faults, health and metrics."""

from __future__ import annotations

import copy
import json
import time
from urllib.parse import urlencode

import pytest

from hitl.bot.errors import BotError
from hitl.bot.settings import BotSettings
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.errors import StoreError
from hitl.sandbox.dispatch import sign
from tests.bot.conftest import SECRET, Harness


async def pending(h: Harness, amount: float = 50, session: str = "ses_e"):  # type: ignore[no-untyped-def]
    p = await h.svc.propose(
        ProposeRequest("refund", {"order_id": "1", "customer_id": "C-1", "amount": amount}, session_id=session)
    )
    assert p.approval is not None
    return p.approval


async def test_bad_signatures_get_401_and_change_nothing(harness: Harness) -> None:
    a = await pending(harness)
    card = copy.deepcopy(harness.card_for(a.id))
    button = next(e for b in card.blocks if b["type"] == "actions" for e in b["elements"])
    payload = {
        "type": "block_actions",
        "user": {"id": "U_SUPPORT1"},
        "actions": [{**button, "block_id": "x"}],
        "team": {"id": "T0SANDBOX"},
        "api_app_id": "A0HITLAPP",
        "token": "t",
        "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": card.ts, "channel_id": card.channel},
    }
    body = urlencode({"payload": json.dumps(payload)})
    now = int(time.time())
    cases = [
        dict(signature="v0=" + "0" * 64),  # forged
        dict(signature=sign("wrong-secret", body, now)),  # wrong secret
        dict(timestamp=now - 301, signature=sign(SECRET, body, now - 301)),  # stale: outside 5 minutes
        dict(signature="garbage"),
        dict(signature=""),
    ]
    for case in cases:
        r = await harness.slack.post(body, **case)  # type: ignore[arg-type]
        assert r.status == 401, case
    async with harness.http.post(
        f"{harness.bot_url}/slack/events",
        data=body.encode(),
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": "soon",
            "X-Slack-Signature": sign(SECRET, body, now),
        },
    ) as resp:
        assert resp.status == 401  # Bolt alone would answer 500 here
    async with harness.http.post(
        f"{harness.bot_url}/slack/events",
        data=body.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ) as resp:
        assert resp.status == 401
    assert (await harness.svc.store.approvals.get(a.id)).version == 1
    assert harness.ephemeral("U_SUPPORT1") == []


async def test_malformed_payloads_never_5xx(harness: Harness) -> None:
    a = await pending(harness)
    bodies = [
        "payload=not-json",
        urlencode({"payload": json.dumps({"type": "block_actions"})}),
        urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "block_actions",
                        "user": {"id": "U_SUPPORT1"},
                        "actions": [{"action_id": "unknown_action", "value": "x"}],
                    }
                )
            }
        ),
        urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "block_actions",
                        "user": {"id": "U_SUPPORT1"},
                        "actions": [{"action_id": ACTION_APPROVE, "value": 12}],
                    }
                )
            }
        ),
        urlencode(
            {
                "payload": json.dumps(
                    {
                        "type": "view_submission",
                        "user": {"id": "U_SUPPORT1"},
                        "view": {"callback_id": "hitl_reject_submit", "private_metadata": "x"},
                    }
                )
            }
        ),
        urlencode({"payload": json.dumps([1, 2, 3])}),
        "",
        "command=/hitl&text=approve",
    ]
    for body in bodies:
        r = await harness.slack.post(body)
        assert r.status < 500, (body, r.status, r.body)
    assert (await harness.svc.store.approvals.get(a.id)).version == 1


async def test_rate_limits_and_server_errors_never_lose_or_repeat_a_decision(harness: Harness) -> None:
    a = await pending(harness)
    card = copy.deepcopy(harness.card_for(a.id))
    harness.state.fail_next("chat.update", status=429, retry_after=1)
    for _ in range(6):  # beyond the SDK's own retries: the notifier keeps the update queued
        harness.state.fail_next("chat.update", status=503)
    r = await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    assert r.status == 200
    await harness.settle()
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED
    updates = harness.state.calls_to("chat.update")
    assert [c.status for c in updates][-1] == 200 and [c.status for c in updates][0] == 429
    assert "Approved" in harness.card_for(a.id).blocks[0]["text"]["text"]
    log = await harness.svc.store.audit.entries(approval_id=a.id)
    assert [e.event for e in log].count("decided") == 1

    b = await pending(harness, amount=60, session="ses_e2")
    harness.state.fail_next("chat.postMessage", status=500)
    for _ in range(4):
        harness.state.fail_next("chat.postMessage", status=500)
    c = await pending(harness, amount=61, session="ses_e3")
    assert [m for m in harness.state.messages if c.id in m.text] == []  # the post failed for now
    await harness.rt.ctx.notifier.sweep()  # the sweeper posts cards that never made it, once
    await harness.rt.ctx.notifier.sweep()
    await harness.settle()
    assert len([m for m in harness.state.messages if c.id in m.text]) == 1
    assert len([m for m in harness.state.messages if b.id in m.text]) == 1


async def test_healthz_and_metrics(harness: Harness) -> None:
    a = await pending(harness)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_APPROVE)
    async with harness.http.get(f"{harness.bot_url}/healthz") as resp:
        assert resp.status == 200 and (await resp.json())["ok"] is True
    harness.clock.advance(90)
    b = await pending(harness, amount=70, session="ses_m2")
    await harness.rt.lifecycle.decide(
        DecideRequest(b.id, "U_SUPPORT1", DecisionKind.REJECT, reason="duplicate"), resume="none"
    )
    await harness.rt.ctx.metrics.hitl.refresh()  # what the background sweep does every 15 s
    async with harness.http.get(f"{harness.bot_url}/metrics") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    assert 'hitl_approvals_requested_total{tier="approve",tool="refund"} 2.0' in text
    assert 'hitl_decisions_total{kind="approve"} 1.0' in text
    # From the store, per tool and tier: two asked, one approved, one rejected; half the decisions corrected.
    assert 'hitl_actions{outcome="asked",tier="approve",tool="refund"} 2.0' in text
    assert 'hitl_actions{outcome="rejected",tier="approve",tool="refund"} 1.0' in text
    assert 'hitl_correction_ratio{tier="approve",tool="refund"} 0.5' in text
    assert 'hitl_intervention_latency_seconds_count{tier="approve",tool="refund"} 2.0' in text
    assert "hitl_correction_rate" not in text  # the per-replica ratio is gone


def test_refuses_to_start_without_a_signing_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BotError, match="SLACK_BOT_TOKEN"):
        BotSettings().require_http()
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    with pytest.raises(BotError, match="SLACK_SIGNING_SECRET is not set"):
        BotSettings().require_http()
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "")
    with pytest.raises(BotError, match="SLACK_SIGNING_SECRET"):
        BotSettings().require_http()
    with pytest.raises(BotError, match="SLACK_APP_TOKEN"):
        BotSettings().require_socket()
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s")
    BotSettings().require_http()


async def test_a_card_update_lost_to_a_crash_is_taken_over(harness: Harness) -> None:
    a = await pending(harness, amount=33, session="ses_crash")
    await harness.svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.APPROVE))
    await harness.settle()
    assert len(harness.state.calls_to("chat.update")) == 1
    # Another replica took the next update job and died before doing it.
    await harness.svc.store.jobs.enqueue("card", {"approval_id": a.id}, now=harness.clock.now())
    taken = await harness.svc.store.jobs.claim("dead-replica", kind="card", limit=10, now=harness.clock.now(), lease=60)
    assert len(taken) == 1
    harness.rt.ctx.notifier.updates.lease = 0  # its lease is over
    harness.rt.ctx.notifier.kick()
    await harness.settle()
    assert len(harness.state.calls_to("chat.update")) == 2
    assert await harness.svc.store.jobs.claim("anyone", kind="card", limit=10, now=harness.clock.now(), lease=0) == []


async def test_card_updates_are_acknowledged_together_and_again_when_the_store_refused(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = harness.svc.store.jobs
    real_ack = jobs.ack
    calls: list[tuple[str, ...]] = []

    async def ack(*job_ids: str) -> None:
        calls.append(job_ids)
        if len(calls) == 1:  # the store is away for the first acknowledgement
            raise StoreError("the store did not answer")
        await real_ack(*job_ids)

    monkeypatch.setattr(jobs, "ack", ack)
    notifier = harness.rt.ctx.notifier
    first = await pending(harness, amount=31, session="ses_ack1")
    second = await pending(harness, amount=32, session="ses_ack2")
    await harness.settle()
    calls.clear()
    # Both decisions queue their card updates before the updater wakes: one pass updates both cards.
    await jobs.enqueue("card", {"approval_id": first.id}, now=harness.clock.now())
    await jobs.enqueue("card", {"approval_id": second.id}, now=harness.clock.now())
    notifier.kick()
    await harness.settle()
    assert len(calls) == 2 and calls[0] == calls[1] and len(calls[0]) == 2  # one call for both, made again
    assert len(harness.state.calls_to("chat.update")) == 2  # each card updated once: the refusal repeated no update
    assert await jobs.claim("anyone", kind="card", limit=10, now=harness.clock.now(), lease=0) == []
