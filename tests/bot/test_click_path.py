"""The click's own path: Slack is answered only once the decision is recorded (or truthfully told it was not), the
body is read once, the card job rides along with the decision, and the fast form reader agrees with the standard
library."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
import slack_bolt.request.async_request
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from hitl.bot.outbound.reviewers import SlackReviewers
from hitl.bot.requests.payloads import Interaction, PayloadError, parse_request
from hitl.bot.server import app_runner, http_app
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import Approval, Reviewer, Status
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.webapi import Message
from tests.bot.conftest import SECRET, Harness
from tests.bot.test_cards_and_clicks import propose


async def test_slack_is_answered_only_once_the_decision_is_recorded(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await propose(harness)
    card = harness.card_for(a.id)
    lookup = SlackReviewers.reviewer

    async def slow_lookup(self: SlackReviewers, user_id: str) -> Reviewer:
        await asyncio.sleep(0.2)  # as a slow users.info or user-group call would be
        return await lookup(self, user_id)

    monkeypatch.setattr(SlackReviewers, "reviewer", slow_lookup)
    harness.slack.after = None
    reply = await asyncio.wait_for(harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE), 5)
    assert reply.status == 200
    # Read before anything else runs: by the time Slack has its answer, the store has the decision.
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED
    await harness.settle()
    assert len(harness.state.calls_to("chat.update")) == 1


async def test_a_decision_the_store_cannot_record_in_time_is_never_recorded_later(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack must hear back within 3 s: past the budget the clicker is told nothing was recorded, and the store
    refuses the decision when it finally reaches it (``too_late``, audited), so the answer stays true."""
    a = await propose(harness)
    card = harness.card_for(a.id)
    release = asyncio.Event()
    lookup = SlackReviewers.reviewer

    async def stuck_lookup(self: SlackReviewers, user_id: str) -> Reviewer:
        await release.wait()
        return await lookup(self, user_id)

    monkeypatch.setattr(SlackReviewers, "reviewer", stuck_lookup)
    harness.rt.ctx.answer_budget = 0.2
    harness.slack.after = None
    reply = await asyncio.wait_for(harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE), 5)
    assert reply.status == 200
    release.set()
    await harness.settle()
    told = [m.text for m in harness.ephemeral("U_SUPPORT1")]
    assert told and "Not recorded" in told[-1], told
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING
    trail = await harness.svc.store.audit.entries(approval_id=a.id)
    assert [(e.event, e.outcome) for e in trail][-1] == ("refused", "too_late")
    assert not harness.state.calls_to("chat.update")


class SlowForLosers:
    """The store's real decide step, held for the reviewers named ``losers`` (as a busy store holds the losing click
    of a race: a row lock, a serialization retry under load) until it is released (``answered``: once the click was
    answered, past its window) or, ``refused``, until the click's window has closed, so the store itself refuses it
    as ``too_late``."""

    def __init__(self, harness: Harness, losers: set[str], *, slow: str) -> None:
        self.decide = harness.rt.store.approvals.decide
        self.losers, self.slow = losers, slow
        self.held, self.release = asyncio.Event(), asyncio.Event()

    async def __call__(self, cmd: DecideCommand, *, now: float) -> Approval:
        if cmd.reviewer.id in self.losers:
            self.held.set()
            if self.slow == "refused":
                assert cmd.answer_by is not None
                await asyncio.sleep(max(cmd.answer_by - time.time(), 0) + 0.05)  # the store's wall clock is past it
            else:
                await self.release.wait()
        return await self.decide(cmd, now=now)


async def lose_a_click(h: Harness, store: SlowForLosers, user: str, card: Message) -> list[str]:
    """``user`` clicks Approve on ``card`` (a copy shown before the race was decided); what they are told."""
    reply = await asyncio.wait_for(h.slack.click(user, card, ACTION_APPROVE), 10)
    assert reply.status == 200
    store.release.set()
    await h.settle()
    return [m.text for m in h.ephemeral(user)]


@pytest.mark.parametrize("slow", ["refused", "answered"])
async def test_a_click_that_lost_to_another_while_the_store_was_slow_is_told_who_decided(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, slow: str
) -> None:
    """Issue 61: two replicas on PostgreSQL under load told 177 of 199 losing clicks "not recorded". The losing click
    is told who decided and what, as any refusal of a decided approval says; a vote refused as too late, on an
    approval still open, is never shown as recorded."""
    store = SlowForLosers(harness, {"U_SUPPORT2", "U_FIN2"}, slow=slow)
    monkeypatch.setattr(harness.rt.store.approvals, "decide", store)
    harness.rt.ctx.answer_budget = 0.2
    harness.slack.after = None

    a = await propose(harness)
    shown = copy.deepcopy(harness.card_for(a.id))
    assert (await harness.slack.click("U_SUPPORT1", harness.card_for(a.id), ACTION_APPROVE)).status == 200
    told = await lose_a_click(harness, store, "U_SUPPORT2", shown)
    assert store.held.is_set() and told, told
    assert "Already decided by <@U_SUPPORT1> (approved)" in told[-1], told
    assert not any("Not recorded" in t or "Vote recorded" in t for t in told), told
    decided = await harness.svc.store.approvals.get(a.id)
    assert decided.status is Status.APPROVED and [d.reviewer for d in decided.decisions] == ["U_SUPPORT1"]
    trail = await harness.svc.store.audit.entries(approval_id=a.id)
    assert [(e.event, e.outcome) for e in trail][-1] == ("refused", "too_late")

    two = await propose(harness, amount=899, session="ses_two")  # two finance approvers
    shown = copy.deepcopy(harness.card_for(two.id))
    assert (await harness.slack.click("U_FIN1", harness.card_for(two.id), ACTION_APPROVE)).status == 200
    store.release.clear()
    told = await lose_a_click(harness, store, "U_FIN2", shown)
    assert told and "Not recorded" in told[-1] and not any("Vote recorded" in t for t in told), told
    still = await harness.svc.store.approvals.get(two.id)
    assert still.is_open and [d.reviewer for d in still.decisions] == ["U_FIN1"]


async def test_bolt_dispatches_the_body_the_server_parsed(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bolt never parses the body again (its urllib + json parse cost as much as the rest of the click)."""

    def refuse(*_: Any) -> dict[str, Any]:
        raise AssertionError("Bolt parsed the body a second time")

    monkeypatch.setattr(slack_bolt.request.async_request, "parse_body", refuse)
    a = await propose(harness)
    reply = await harness.slack.click("U_SUPPORT1", harness.card_for(a.id), ACTION_APPROVE)
    assert reply.status == 200
    await harness.settle()
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED


async def test_the_card_job_is_queued_by_the_decision_itself(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    a = await propose(harness)
    enqueued: list[str] = []
    enqueue = harness.rt.store.jobs.enqueue

    async def watched(kind: str, payload: dict[str, Any], *, now: float) -> str:
        enqueued.append(kind)
        return await enqueue(kind, payload, now=now)

    monkeypatch.setattr(harness.rt.store.jobs, "enqueue", watched)
    await harness.slack.click("U_SUPPORT1", harness.card_for(a.id), ACTION_APPROVE)
    await harness.settle()
    assert "card" not in enqueued  # no second round trip: the decide step queued it
    assert len(harness.state.calls_to("chat.update")) == 1
    assert not any(b["type"] == "actions" for b in harness.card_for(a.id).blocks)


async def test_a_server_without_a_signing_secret_accepts_nothing(harness: Harness) -> None:
    """Bolt's own signature check is off, so the server's is the only one: without a secret nothing gets in."""
    app = http_app(dataclasses.replace(harness.rt.bot, signing_secret=None))
    runner = app_runner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        unsigned = Dispatcher(
            harness.state, harness.http, bot_url=f"http://127.0.0.1:{port}/slack/events", signing_secret=SECRET
        )
        a = await propose(harness)
        reply = await unsigned.click("U_SUPPORT1", harness.card_for(a.id), ACTION_APPROVE)
        assert reply.status == 401
    finally:
        await runner.cleanup()
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, user=st.from_regex(r"[A-Z0-9]{1,12}", fullmatch=True), extra=_TEXT)
def test_a_command_form_reads_as_the_standard_library_reads_it(text: str, user: str, extra: str) -> None:
    body = urlencode({"command": "/hitl", "user_id": user, "text": text, "team_domain": extra}).encode()
    expected = dict(parse_qsl(body.decode(), keep_blank_values=True))
    assert parse_request(body).body == expected


@settings(max_examples=200, deadline=None)
@given(value=_TEXT, reason=_TEXT)
def test_a_payload_reads_as_json_reads_it(value: str, reason: str) -> None:
    payload = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "actions": [{"action_id": "hitl_approve", "value": value[:2000]}],
        "note": reason,
    }
    parsed = parse_request(urlencode({"payload": json.dumps(payload)}).encode())
    assert parsed.body == payload
    assert isinstance(parsed.request, Interaction) and parsed.request.actions[0].value == value[:2000]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"payload=%7B%22a%22%3A%22%FF%22%7D", "body is not a form"),  # an escape that is not UTF-8
        (b"command=%2Fhitl&user_id=U1&text=%C3", "body is not a form"),
        (urlencode({"payload": '{"type":"block_actions","x":' + "[" * 40 + "]" * 40 + "}"}).encode(), "deeper"),
        (urlencode({"payload": '{"type":"block_actions","user":{"id":"\\ud800"}}'}).encode(), "not valid JSON"),
    ],
)
def test_what_the_fast_reader_cannot_decode_is_refused(body: bytes, reason: str) -> None:
    with pytest.raises(PayloadError, match=reason):
        parse_request(body)


def test_text_that_holds_a_replacement_character_is_still_read() -> None:
    body = urlencode({"command": "/hitl", "user_id": "U1", "text": "approve \ufffd 100%"}).encode()
    assert parse_request(body).body["text"] == "approve \ufffd 100%"


@pytest.mark.parametrize("access_log", [False, True])
async def test_the_access_log_is_off_unless_asked_for(
    harness: Harness, caplog: pytest.LogCaptureFixture, access_log: bool
) -> None:
    runner = app_runner(http_app(harness.rt.bot), shutdown_timeout=1.0, access_log=access_log)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        with caplog.at_level(logging.INFO, logger="aiohttp.access"):
            async with harness.http.get(f"http://127.0.0.1:{runner.addresses[0][1]}/healthz") as r:
                assert r.status == 200
            await asyncio.sleep(0)  # the line is written after the response
    finally:
        await runner.cleanup()
    lines = [rec for rec in caplog.records if rec.name == "aiohttp.access"]
    assert bool(lines) is access_log
