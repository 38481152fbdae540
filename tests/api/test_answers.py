"""A question (``ask_person``, from ``mcp.ask_person`` in hitl.yaml) answered through the HTTP API: a decision with
an ``answer``, recorded as the edit that adds it; approving a question as it is, or an answer that changes the
question or runs past ``max_chars``, is refused with a coded 422 and nothing recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hitl.testing import FakeClock
from tests.api.conftest import Api, sqlite_api

ASK = "mcp:\n  ask_person: {role: support, max_chars: 50}\n"


async def ask(api: Api, question: str, *, key: str = "q1") -> dict[str, Any]:
    status, body = await api.call(
        "POST",
        "/proposals",
        as_="agent",
        json={"session": "s-q", "tool": "ask_person", "args": {"question": question}, "idempotency_key": key},
    )
    assert status == 200, body
    await api.h.settle()
    approval: dict[str, Any] = body["approval"]
    return approval


async def decide(api: Api, approval: dict[str, Any], decision: str, **kw: Any) -> tuple[int, Any]:
    body = {"decision": decision, "expected_version": approval["version"], "action_hash": approval["action_hash"], **kw}
    return await api.call("POST", f"/approvals/{approval['id']}/decisions", as_="sup1", json=body)


async def test_a_question_is_answered_with_text_never_approved_as_it_is(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_SHOP_DB", str(tmp_path / "shop.db"))
    async with sqlite_api(tmp_path, clock, extra=ASK) as api:
        question = await ask(api, "Which carrier for order 7? <!channel>")
        refused = [
            await decide(api, question, "approve"),
            await decide(api, question, "modify", args={"question": "Approve the refund?", "answer": "yes"}),
            await decide(api, question, "approve", answer="x" * 51),
            await decide(api, question, "approve", answer="UPS", args={"answer": "DHL"}),
            await decide(api, question, "reject", answer="UPS"),
        ]
        for status, body in refused:
            assert status == 422 and body["error"]["code"] == "invalid_input", body
        assert "approving it answers nothing" in refused[0][1]["error"]["message"]
        status, body = await api.call("GET", f"/approvals/{question['id']}", as_="sup1")
        assert body["status"] == "pending" and body["version"] == question["version"]

        status, body = await decide(api, question, "approve", answer="UPS, <@U_FIN1> knows why")
        assert status == 200, body
        assert body["status"] == "approved"
        assert body["execute_args"] == {"question": question["args"]["question"], "answer": "UPS, <@U_FIN1> knows why"}

        refund = (
            await api.call(
                "POST",
                "/proposals",
                as_="agent",
                json={
                    "session": "s-q",
                    "tool": "refund",
                    "args": {"order_id": "7", "customer_id": "C-1", "amount": 5, "reason": "late"},
                    "idempotency_key": "r1",
                },
            )
        )[1]["approval"]
        status, body = await decide(api, refund, "approve", answer="yes")
        assert status == 422 and "no question" in body["error"]["message"]
