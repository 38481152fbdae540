"""The same workflow and the same decision give the same next approval, whichever surface the decision came from.

The workflow's step ``s2`` uses tool ``b``, whose policy (finance, two distinct approvers) is declared in the
workflow itself; ``hitl.yaml`` knows only tool ``a`` (support). Step 1 is decided through each surface: the CLI
(``hitl resume`` in a subprocess), a Slack click and a Slack Modify (signed requests to the real bot, the run
resumed by ``hitl serve``'s background work), the HTTP API (a bearer token, the same server), the Python API, and
expiry fallbacks (``hitl serve``'s background loop, and ``hitl expire``). Each must pause the run on the very same
approval for ``b``: finance, quorum 2, the same id. Before one composition served every surface, a Slack click
paused it for "any reviewer, quorum 1".
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hitl.api import token_hash
from hitl.bot.views.controls import ACTION_APPROVE, ACTION_MODIFY
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.ids import approval_id, dedupe_key
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.ports import Store
from hitl.engine.runtime.process import Runtime
from hitl.engine.storage import open_store
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import Harness, start, stop
from tests.bot.test_modals_and_commands import field_values, last_view
from tests.refund_config import write_refund_config

FLOWS = Path(__file__).parent / "flows"
TOOL_FLOW = FLOWS / "tool_then_pay.yaml"
GATE_FLOW = FLOWS / "gate_then_pay.yaml"
CONFIG = FLOWS / "hitl.yaml"
SESSION = "ses_SAMEDECISION"
EXPECTED = (
    "b",
    "approve",
    "finance",
    2,
    approval_id(dedupe_key("agent:riley", f"{SESSION}:s2:0:{action_hash('b', {'amount': 7})}")),
)


@dataclass
class Backend:
    url: str
    ledger: Path
    clock: FakeClock

    def store(self) -> Store:
        return open_store(self.url)

    def calls(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines()]


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Backend:
    url = fresh_store_url(request.param, request, tmp_path, tag="same")
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("HITL_TEST_LEDGER", str(ledger))
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    return Backend(url=url, ledger=ledger, clock=FakeClock())


def _shape(a: Approval | dict[str, Any]) -> tuple[Any, ...]:
    if isinstance(a, Approval):
        return (a.tool, str(a.tier), a.required_role, a.quorum, a.id)
    return (a["tool"], a["tier"], a["required_role"], a["quorum"], a["id"])


async def _hitl(backend: Backend, *args: str, now: float | None = None) -> dict[str, Any]:
    env = {
        **os.environ,
        "HITL_STORE": backend.url,
        "HITL_CONFIG": "",
        "HITL_REVIEWER": "",
        "HITL_NOW": "" if now is None else repr(now),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hitl",
        *args,
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert out.strip(), err.decode()
    return dict(json.loads(out))


async def _serve(backend: Backend, config: Path = CONFIG) -> Harness:
    """``hitl serve``'s real composition on the backend, with the signed-request Slack stand-in."""
    return await start(backend.store(), backend.clock, config=config)


async def _paused_on(store: Store, session: str) -> Approval:
    found = await store.runs.load(session)
    assert found is not None and found.data["status"] == RunStatus.PAUSED, found
    return await store.approvals.get(str(found.data["waiting"]))


async def via_cli(backend: Backend) -> tuple[Any, ...]:
    first = await _hitl(backend, "run", str(TOOL_FLOW), "--session", SESSION)
    assert first["status"] == "paused" and first["approval"]["tool"] == "a"
    second = await _hitl(backend, "resume", first["approval_id"], "--approve", "--as", "U_SUPPORT1")
    assert second["status"] == "paused", second
    return _shape(second["approval"])


async def _click(
    backend: Backend, decide: Callable[[Harness, Approval], Awaitable[None]], *, config: Path = CONFIG
) -> tuple[Any, ...]:
    h = await _serve(backend, config)
    try:
        r = await h.rt.lifecycle.start(load_workflow(TOOL_FLOW), {}, session_id=SESSION)
        assert r.approval is not None and r.approval.tool == "a"
        await h.settle()  # its card is posted by the bot's worker
        await decide(h, r.approval)
        assert await h.rt.lifecycle.process_jobs() == 1  # the decision queued exactly one durable resume
        return _shape(await _paused_on(h.rt.store, SESSION))
    finally:
        await stop(h)


async def via_slack_click(backend: Backend) -> tuple[Any, ...]:
    async def approve(h: Harness, a: Approval) -> None:
        await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_APPROVE)

    return await _click(backend, approve)


async def via_slack_modify(backend: Backend) -> tuple[Any, ...]:
    async def modify(h: Harness, a: Approval) -> None:
        await h.slack.click("U_SUPPORT1", copy.deepcopy(h.card_for(a.id)), ACTION_MODIFY)
        view_id, view = last_view(h)
        reply = await h.slack.submit("U_SUPPORT1", view_id, field_values(view, x=6))
        assert reply.status == 200 and reply.json() is None, reply.body  # accepted: the modal closes

    return await _click(backend, modify)


async def via_http_api(backend: Backend) -> tuple[Any, ...]:
    token = "tok-same-decision"
    config = backend.ledger.parent / "hitl-api.yaml"
    spec = f"{{name: sup1, sha256: {token_hash(token)}, reviewer: U_SUPPORT1, scopes: [read, decide]}}"
    write_refund_config(config, f"{CONFIG.read_text()}api:\n  tokens:\n    - {spec}\n")

    async def approve(h: Harness, a: Approval) -> None:
        body = {"decision": "approve", "expected_version": a.version, "action_hash": a.action_hash}
        url = f"{h.bot_url}/api/v1/approvals/{a.id}/decisions"
        async with h.http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 200, await r.text()

    return await _click(backend, approve, config=config)


async def via_python_api(backend: Backend) -> tuple[Any, ...]:
    rt = Runtime.build(store=backend.store(), clock=backend.clock, config_path=None)
    try:
        r = await rt.lifecycle.start(load_workflow(TOOL_FLOW), {}, session_id=SESSION)
        assert r.approval is not None
        d = await rt.lifecycle.decide(DecideRequest(r.approval.id, "U_SUPPORT1", DecisionKind.APPROVE), resume="inline")
        assert d.run is not None and d.run.approval is not None
        return _shape(d.run.approval)
    finally:
        await rt.close()


async def via_serve_expiry(backend: Backend) -> tuple[Any, ...]:
    h = await _serve(backend)
    try:
        r = await h.rt.lifecycle.start(load_workflow(GATE_FLOW), {}, session_id=SESSION)
        assert r.approval is not None and r.approval.tool == "gate:s1"
        backend.clock.advance(31 * 60)
        await h.rt.background.tick()  # expire, queue the fallback's resume, run it
        return _shape(await _paused_on(h.rt.store, SESSION))
    finally:
        await stop(h)


async def via_cli_expiry(backend: Backend) -> tuple[Any, ...]:
    t0 = backend.clock.now()
    first = await _hitl(backend, "run", str(GATE_FLOW), "--session", SESSION, now=t0)
    assert first["status"] == "paused"
    await _hitl(backend, "expire", now=t0 + 31 * 60)
    store = backend.store()
    try:
        return _shape(await _paused_on(store, SESSION))
    finally:
        await store.close()


SURFACES: dict[str, Callable[[Backend], Awaitable[tuple[Any, ...]]]] = {
    "cli": via_cli,
    "slack_click": via_slack_click,
    "slack_modify": via_slack_modify,
    "http_api": via_http_api,
    "python_api": via_python_api,
    "serve_expiry": via_serve_expiry,
    "cli_expiry": via_cli_expiry,
}


@pytest.mark.parametrize("surface", list(SURFACES))
async def test_the_same_decision_gives_the_same_next_approval(backend: Backend, surface: str) -> None:
    assert await SURFACES[surface](backend) == EXPECTED
    calls = backend.calls()
    if surface.endswith("expiry"):
        assert calls == []  # the gate expired and fell back to continue: nothing ran before b's approval
    else:
        x = 6 if surface == "slack_modify" else 5
        assert calls == [{"tool": "a", "x": x}]  # step 1 ran once, with what was approved; b waits for finance
