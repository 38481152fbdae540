"""Slow and odd HTTP on `hitl serve`'s web app: half-sent bodies are cut off and their connections closed while
health checks and clicks answer at once; compressed bodies are refused before anything decodes them; none of it
logs an ERROR or a traceback."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from urllib.parse import urlsplit

import pytest

import hitl.bot.server
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.models import Status
from tests.bot.conftest import Harness
from tests.bot.test_cards_and_clicks import propose

SLOW = 200


async def _half_sent(host: str, port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    signed = f"X-Slack-Request-Timestamp: {int(time.time())}\r\nX-Slack-Signature: v0=00\r\n"
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{signed}"
        'Content-Length: 100000\r\n\r\n{"a": '.encode()
    )
    await writer.drain()
    return reader, writer


async def _closed_after(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before closing."""
    return await asyncio.wait_for(reader.read(), 30)


async def test_two_hundred_half_sent_bodies_are_cut_off_while_others_are_served(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    deadline = 4.0  # the same rule at a test's pace (10 s in service), long enough to be served meanwhile
    monkeypatch.setattr(hitl.bot.server, "BODY_DEADLINE", deadline)
    url = urlsplit(harness.bot_url)
    host, port = str(url.hostname), int(url.port or 0)
    a = await propose(harness)
    paths = ["/slack/events", "/api/v1/approvals", "/healthz", "/metrics"]
    slow: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        with caplog.at_level(logging.INFO):
            slow = await asyncio.gather(*(_half_sent(host, port, paths[i % len(paths)]) for i in range(SLOW)))
            watching = [asyncio.create_task(_closed_after(r)) for r, _ in slow]
            # Meanwhile the server answers everyone else, while the slow Slack requests are still held open (the
            # others are refused unread at once, and close within LINGER).
            held = [t for i, t in enumerate(watching) if paths[i % len(paths)] == "/slack/events"]
            async with harness.http.get(f"{harness.bot_url}/healthz") as resp:
                assert resp.status == 200
            reply = await harness.slack.click("U_SUPPORT1", harness.card_for(a.id), ACTION_APPROVE)
            assert reply.status == 200
            assert not [t for t in held if t.done()], "a slow Slack request ended before the others were served"
            assert (await harness.svc.store.approvals.get(a.id)).status is Status.APPROVED
            ended = await asyncio.gather(*watching)
    finally:
        for _, writer in slow:
            writer.close()
    statuses = [int(got.split(b" ", 2)[1]) for got in ended]
    # The Slack route reads the body (to check its signature): cut off with a 408. The others refuse it unread.
    assert {
        s
        for s, path in zip(statuses, [paths[i % len(paths)] for i in range(SLOW)], strict=True)
        if path == "/slack/events"
    } == {408}
    assert all(400 <= s < 500 for s in statuses), set(statuses)
    # Cut off by the deadline (the answer names it), not by some other timeout; each closed (its read returned).
    assert all(b"did not arrive within 4 s" in got for got, s in zip(ended, statuses, strict=True) if s == 408)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("signed", [False, True])
async def test_a_compressed_body_is_refused_before_it_is_decoded(
    harness: Harness, caplog: pytest.LogCaptureFixture, signed: bool
) -> None:
    garbage = b"\x78\x9c" + bytes(range(256)) * 4  # a deflate header over nonsense
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Content-Encoding": "deflate"}
    if signed:
        from hitl.sandbox.dispatch import sign

        stamp = int(time.time())
        headers |= {"X-Slack-Request-Timestamp": str(stamp), "X-Slack-Signature": sign("x", "x", stamp)}
    with caplog.at_level(logging.INFO):
        for body in (garbage, zlib.compress(b"payload=%7B%7D")):
            async with harness.http.post(f"{harness.bot_url}/slack/events", data=body, headers=headers) as resp:
                assert resp.status == 415
        async with harness.http.get(f"{harness.bot_url}/healthz") as resp:
            assert resp.status == 200  # the server and its other connections are fine
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
