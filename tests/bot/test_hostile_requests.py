"""Hostile HTTP edges: odd signature headers, tampered button values, slow bodies. None is a 5xx, a traceback
or a change."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web

import hitl.bot.server
from hitl.bot.requests.button_values import parse_button_value
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.sandbox.dispatch import sign
from tests.bot.conftest import SECRET, Harness

HASH = "a" * 64


@pytest.mark.parametrize(
    "value",
    [
        f"apr_0123456789|\u00b9|{HASH}",  # superscript one
        f"apr_0123456789|\u0661|{HASH}",  # Arabic-Indic one
        f"apr_0123456789|01|{HASH}",  # leading zero
        f"apr_0123456789|1|{HASH}\n",  # trailing newline
        f"apr_0123456789|0|{HASH}",
        f"apr_0123456789|1|{HASH.upper()}",
        f"apr_0123456789|1|{HASH}|extra",
        "",
    ],
)
def test_button_values_follow_the_exact_ascii_grammar(value: str) -> None:
    assert parse_button_value(value) is None
    assert parse_button_value(f"apr_0123456789|12|{HASH}") == ("apr_0123456789", 12, HASH)


async def small_refund(harness: Harness, session: str) -> Approval:
    """A refund of 5 proposed in ``session`` (one to aim hostile requests at): its pending approval."""
    p = await harness.svc.propose(
        ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": 5}, session_id=session)
    )
    assert p.approval is not None
    return p.approval  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("stamp", "signature", "status"),
    [
        ("\u00b9\u2077\u2070\u2070", None, 400),  # Unicode superscript digits
        ("1700000000", "v0=\u00e9" + "0" * 63, 400),  # non-ASCII signature
        ("1" * 40, None, 401),
        ("-1", None, 401),
        ("", None, 401),
    ],
)
async def test_odd_signature_headers_are_4xx_before_anything_parses_them(
    harness: Harness, caplog: pytest.LogCaptureFixture, stamp: str, signature: str | None, status: int
) -> None:
    a = await small_refund(harness, "h")
    card = copy.deepcopy(harness.card_for(a.id))
    button = next(e for b in card.blocks if b["type"] == "actions" for e in b["elements"])
    body = urlencode(
        {"payload": json.dumps({"type": "block_actions", "user": {"id": "U_SUPPORT1"}, "actions": [button]})}
    )
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature if signature is not None else sign(SECRET, body, int(time.time())),
    }
    with caplog.at_level(logging.INFO):
        async with harness.http.post(
            f"{harness.bot_url}/slack/events", data=body.encode("utf-8"), headers=headers
        ) as r:
            assert r.status == status
    assert "Traceback" not in caplog.text
    assert (await harness.svc.store.approvals.get(a.id)).version == 1
    refused = [e for e in await harness.svc.store.audit.entries() if e.actor == "unauthenticated"]
    if status == 401:  # a forged or stale request is an attempt: in the audit trail, as the API's are
        [entry] = refused
        assert entry.outcome == "unauthorized" and "via slack from 127.0.0.1: no valid Slack signature" in entry.detail
    else:  # headers no one could have signed are refused before they are read: nothing to attribute
        assert refused == []


async def test_a_slow_body_is_cut_off(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hitl.bot.server, "REQUEST_TIMEOUT", 0.5)
    host, port = harness.bot_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    stamp = str(int(time.time()))
    writer.write(
        (
            "POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: 5000\r\nX-Slack-Request-Timestamp: {stamp}\r\nX-Slack-Signature: v0=00\r\n\r\npayload="
        ).encode()
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 20)
    assert answer.startswith(b"HTTP/1.1 408") and b"request timeout" in answer  # the request's timeout cut it off
    writer.close()
    await asyncio.gather(writer.wait_closed(), return_exceptions=True)
    async with harness.http.get(f"{harness.bot_url}/healthz") as r:
        assert r.status == 200


@pytest.mark.parametrize("what", ["line", "header", "garbage"])
async def test_a_request_past_the_http_limits_is_a_400_and_one_log_line(
    harness: Harness, caplog: pytest.LogCaptureFixture, what: str
) -> None:
    host, port = harness.bot_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = {
        "line": f"GET /api/v1/approvals?cursor={'x' * 40_000} HTTP/1.1\r\nHost: h\r\n\r\n",
        "header": f"GET /healthz HTTP/1.1\r\nHost: h\r\nX-Big: {'y' * 20_000}\r\n\r\n",
        "garbage": "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n",
    }[what]
    with caplog.at_level(logging.DEBUG):
        writer.write(request.encode("latin-1"))
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        await asyncio.gather(writer.wait_closed(), return_exceptions=True)
    assert status_line.split(b" ")[1] == b"400", status_line
    mine = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert mine and all(r.levelno == logging.WARNING and not r.exc_info for r in mine)  # no traceback
    assert "refused a malformed HTTP request (400)" in mine[0].getMessage()
    async with harness.http.get(f"{harness.bot_url}/healthz") as r:
        assert r.status == 200


async def test_a_legacy_interactive_message_is_not_a_click(harness: Harness) -> None:
    a = await small_refund(harness, "legacy")
    legacy = {
        "type": "interactive_message",
        "callback_id": "hitl_approve",
        "user": {"id": "U_SUPPORT1"},
        "actions": [{"name": "hitl_approve", "action_id": "hitl_approve", "value": f"{a.id}|1|{a.action_hash}"}],
        "response_url": harness.state.new_response_url("C1", "U_SUPPORT1"),
    }
    reply = await harness.slack.send("interactive", legacy)
    assert reply.status < 500
    assert (await harness.svc.store.approvals.get(a.id)).status is Status.PENDING


async def test_response_urls_off_slack_are_never_followed(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signed payload whose response_url points elsewhere gets no reply sent there; the click still counts."""
    hits: list[str] = []

    async def evil(request: web.Request) -> web.Response:
        hits.append(await request.text())
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/{tail:.*}", evil)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        approval = await small_refund(harness, "ru")
        monkeypatch.setattr(harness.state, "new_response_url", lambda *_: f"http://127.0.0.1:{port}/steal")
        card = copy.deepcopy(harness.card_for(approval.id))
        await harness.slack.click("U_STRANGER", card, ACTION_APPROVE)  # refused: the refusal would go to respond()
        await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
        assert hits == []
        assert (await harness.svc.store.approvals.get(approval.id)).status is Status.APPROVED
    finally:
        await runner.cleanup()


async def test_an_unreadable_click_is_told_so_privately_and_changes_nothing(harness: Harness) -> None:
    approval = await small_refund(harness, "unread")
    card = copy.deepcopy(harness.card_for(approval.id))
    button = next(e for b in card.blocks if b["type"] == "actions" for e in b["elements"])
    payload = {
        "type": "block_actions",
        "user": {"id": "U_SUPPORT1"},
        "actions": [button],
        "container": ["not", "an", "object"],  # the wrong type: the whole click is unreadable
        "response_url": harness.state.new_response_url(card.channel, "U_SUPPORT1"),
    }
    body = urlencode({"payload": json.dumps(payload)})
    reply = await harness.slack.post(body)
    assert reply.status == 400
    assert "could not be read" in harness.ephemeral("U_SUPPORT1")[-1].text
    assert (await harness.svc.store.approvals.get(approval.id)).status is Status.PENDING


async def test_slow_connections_cannot_starve_the_server(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the in-flight limit a Slack request gets 429 with Retry-After at once; health checks still answer."""
    monkeypatch.setattr(hitl.bot.server, "MAX_IN_FLIGHT", 5)
    monkeypatch.setattr(hitl.bot.server, "REQUEST_TIMEOUT", 3.0)
    host, port = harness.bot_url.removeprefix("http://").split(":")
    head = (
        "POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: 5000\r\nX-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0=00\r\n\r\n"
    ).encode()
    slow = []
    for _ in range(5):  # five slow senders hold every slot
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head + b"payload=")
        await writer.drain()
        slow.append((reader, writer))
    await asyncio.sleep(0.2)
    r = await harness.slack.post("payload=%7B%7D")
    assert r.status == 429
    async with harness.http.get(f"{harness.bot_url}/healthz") as health:
        assert health.status == 200
    for reader, writer in slow:  # the slow ones are cut off by the request timeout
        line = await asyncio.wait_for(reader.readline(), 6)
        assert line.startswith(b"HTTP/1.1 408")
        writer.close()
        await asyncio.gather(writer.wait_closed(), return_exceptions=True)
    assert (await harness.slack.post("payload=%7B%7D")).status == 400  # slots free again


async def test_an_oversize_chunked_body_is_refused_as_it_streams(harness: Harness) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"payload="
        for _ in range(64):  # 4 MiB, never announced: chunked transfer encoding
            yield b"A" * 65536
            await asyncio.sleep(0)

    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": str(int(time.time()))}
    headers["X-Slack-Signature"] = "v0=" + "0" * 64
    try:
        async with harness.http.post(f"{harness.bot_url}/slack/events", data=chunks(), headers=headers) as r:
            status = r.status
    except aiohttp.ClientError:
        status = 413  # the server may close the connection as soon as the limit is passed, mid-upload
    assert status == 413
    async with harness.http.get(f"{harness.bot_url}/healthz") as health:
        assert health.status == 200


async def test_a_tampered_button_is_refused_and_audited(harness: Harness) -> None:
    approval = await small_refund(harness, "tamper")
    card = copy.deepcopy(harness.card_for(approval.id))
    value = f"{approval.id}|01|{approval.action_hash}"  # a leading zero: not our grammar
    for block in card.blocks:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            element["value"] = value
    await harness.slack.click("U_SUPPORT1", card, ACTION_APPROVE)
    assert "not valid" in harness.ephemeral("U_SUPPORT1")[-1].text
    assert (await harness.svc.store.approvals.get(approval.id)).status is Status.PENDING
    refused = [e for e in await harness.svc.store.audit.entries(limit=500) if e.outcome == "tampered_button"]
    assert len(refused) == 1 and refused[0].actor == "U_SUPPORT1" and refused[0].approval_id == approval.id
