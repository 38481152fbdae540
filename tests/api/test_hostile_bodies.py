"""The API's counterpart of the hostile corpus (tests/bot/test_hostile_corpus.py): hostile bodies on every endpoint
that reads one, against `hitl serve` (the bot's harness, the API included; receipts configured, so that every route
reaches its body). JSON nested past :data:`MAX_NESTING` levels is 400 ``malformed_json``, at 1,000 and 100,000 levels
too (inside ``api.max_body``, raised here so that the deepest body is read rather than refused for its size); a client
that hangs up on its body before, at or after the body deadline leaves at most one warning. Neither changes anything,
logs an ERROR or a traceback."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import hitl.bot.server
from hitl.api import token_hash
from hitl.api.app import endpoints
from hitl.engine.domain.nesting import MAX_NESTING
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts.signing import new_key_pem
from hitl.testing import FakeClock
from tests.bot.conftest import Harness, start, stop
from tests.receipts.conftest import CONFIG
from tests.waiting import eventually

ADMIN = "tok-admin-hostile"
MAX_BODY = 512 * 1024
"""Room for the 100,000-level bodies (200 KB of arrays, 500 KB of objects): the default api.max_body (64 KiB) would
refuse them unread, for their size."""
DEEP = [MAX_NESTING + 1, 1_000, 100_000]


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """`hitl serve` on SQLite with receipts and an admin token (every scope), its rate out of the way."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    admin = f"    - {{name: admin, sha256: {token_hash(ADMIN)}, reviewer: U_FIN2, scopes: [admin]}}\n"
    (tmp_path / "hitl.yaml").write_text(CONFIG + admin + f"  max_body: {MAX_BODY}\n  rate: 1000\n  burst: 1000\n")
    h = await start(SqliteStore(tmp_path / "hitl.db"), clock, config=tmp_path / "hitl.yaml")
    try:
        yield h
    finally:
        await stop(h)


def _bodies(levels: int) -> list[bytes]:
    """``levels`` deep as arrays, as objects, and as a field of an object (each is one level)."""
    return [
        b"[" * levels + b"]" * levels,
        b'{"":' * levels + b"1" + b"}" * levels,
        b'{"args":' + b"[" * (levels - 1) + b"]" * (levels - 1) + b"}",
    ]


def _with_body() -> list[tuple[str, str]]:
    """Every route that reads a body, its path parameters filled in."""
    return [(e.method, "/" + e.path.lstrip("/").replace("{", "").replace("}", "")) for e in endpoints() if e.body]


async def test_json_nested_past_the_limit_is_malformed_on_every_endpoint_and_changes_nothing(
    served: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    routes = _with_body()
    assert {path for _, path in routes} >= {"/proposals", "/receipts/allowed", "/receipts/claim", "/delegations"}
    audited = len(await served.svc.store.audit.entries(limit=1000))
    headers = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    answers: dict[tuple[str, int, int], tuple[int, str]] = {}
    with caplog.at_level(logging.INFO):
        for method, path in routes:
            for levels in DEEP:
                for shape, body in enumerate(_bodies(levels)):
                    assert len(body) < MAX_BODY
                    url = f"{served.bot_url}/api/v1{path}"
                    async with served.http.request(method, url, data=body, headers=headers) as r:
                        answer = await r.json(content_type=None)
                        answers[(path, levels, shape)] = (r.status, answer["error"]["code"])
        # The limit itself is JSON as any other: read, and refused (if at all) for what it says.
        async with served.http.post(
            f"{served.bot_url}/api/v1/proposals", data=_bodies(MAX_NESTING)[2], headers=headers
        ) as r:
            assert r.status == 422 and (await r.json())["error"]["code"] == "invalid_input"
    assert {key: got for key, got in answers.items() if got != (400, "malformed_json")} == {}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert len(await served.svc.store.audit.entries(limit=1000)) == audited
    assert (await served.svc.store.approvals.list_pending(limit=10)).items == []


@pytest.mark.parametrize("path", ["/slack/events", "/api/v1/proposals"])
@pytest.mark.parametrize("hang_up", [-0.05, 0.0, 0.05], ids=["before", "at", "after"])
async def test_a_client_hanging_up_at_the_body_deadline_leaves_one_warning_at_most(
    served: Harness,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    path: str,
    hang_up: float,
) -> None:
    deadline = 0.5  # the same rule at a test's pace (10 s in service)
    monkeypatch.setattr(hitl.bot.server, "BODY_DEADLINE", deadline)
    url = urlsplit(served.bot_url)
    part = json.dumps({"session": "s", "tool": "pay", "args": {"amount": 1}}).encode()[:20]
    with caplog.at_level(logging.INFO):
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {url.hostname}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {ADMIN}\r\nX-Slack-Request-Timestamp: 1\r\nX-Slack-Signature: v0=00\r\n"
            f"Content-Length: 1000\r\n\r\n".encode()
            + part
        )
        await writer.drain()
        await asyncio.sleep(deadline + hang_up)
        writer.transport.abort()  # gone at once, whatever is in flight
        server = served.runner.server
        assert server is not None
        await eventually(lambda: not server.connections, what="the server to let the connection go")
    noted = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [r for r in noted if r.levelno >= logging.ERROR or r.exc_info], [r.getMessage() for r in noted]
    assert len(noted) <= 1, [r.getMessage() for r in noted]
    assert "Traceback" not in caplog.text
