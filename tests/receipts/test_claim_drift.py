"""Drift (``consequence_check: true``) on ``/receipts/claim``, through a running `hitl serve`: a process that claims
an approved execution there with its receipt is held to the same check as every other path, so an approval whose
consequence drifted after it was approved gets no receipt and is asked again, never handed out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.bot.conftest import Harness
from tests.receipts.conftest import AGENT, CONFIG, api, approve, receipts_served
from tests.waiting import eventually

CHECKED = CONFIG.replace(
    "      timeout: 1h\n",
    '      timeout: 1h\n      consequence: "tests.consequence_tools:ticking"\n      consequence_check: true\n',
)


@pytest.fixture
async def checked(tmp_path: Path) -> AsyncIterator[Harness]:
    """``hitl serve`` with receipts, its ``pay`` consequence changing on every run (so it drifts when checked)."""
    assert CHECKED != CONFIG
    async with receipts_served(tmp_path, CHECKED) as h:
        yield h


async def test_a_receipt_claim_of_a_drifted_approval_is_refused_and_asks_again(checked: Harness) -> None:
    proposal = {"session": "ses_d", "tool": "pay", "args": {"to": "V-1", "amount": 5}, "idempotency_key": "k-drift"}
    pending = await api(checked, "POST", "/proposals", AGENT, proposal)
    asked = pending["approval"]
    assert asked["consequence"] is not None, asked
    await approve(checked, asked)
    body = {"key": pending["execution_key"], "action_hash": asked["execute_hash"], "holder": "agent-proc"}
    headers = {"Authorization": f"Bearer {AGENT}"}
    async with checked.http.post(f"{checked.bot_url}/api/v1/receipts/claim", json=body, headers=headers) as r:
        status, answer = r.status, await r.json()
    assert status == 409 and answer["error"]["code"] == "consequence_drifted", (status, answer)
    first = await api(checked, "GET", f"/approvals/{asked['id']}", AGENT)
    assert first["status"] == "superseded", first

    async def asked_again() -> list[dict[str, Any]] | None:
        page = await api(checked, "GET", "/approvals?status=pending", AGENT)
        return [a for a in page["items"] if a["id"] != asked["id"]] or None

    [again] = await eventually(asked_again, what="the drifted payment asked again")
    assert again["drift"]["of"] == asked["id"], again
    assert await checked.service.store.ledger.get(pending["execution_key"]) is None  # nothing was claimed
