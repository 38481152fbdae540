"""JSON Schema on approvals: a bad schema fails closed, edits are checked against the snapshot, and an approval made
by an asker that cannot run edits refuses Modify everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.engine.agents.gate import ToolCall, ToolGate
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.arg_schema import check_schema, schema_errors
from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import InvalidInput
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "maxLength": 8}, "amount": {"type": "number", "minimum": 0.01}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}
CONFIG = parse_config("roles: {support: [U_S1]}\npolicy: {tools: {refund: {tier: approve, role: support}}}")


def test_schema_checks_and_field_errors() -> None:
    assert check_schema("refund", SCHEMA) is SCHEMA
    with pytest.raises(InvalidInput, match="not valid JSON Schema"):
        check_schema("refund", {"type": "object", "properties": {"amount": {"type": "money"}}})
    with pytest.raises(InvalidInput, match="must describe an object"):
        check_schema("refund", {"type": "array"})
    with pytest.raises(InvalidInput, match="at most"):
        check_schema("refund", {"type": "object", "description": "x" * 70_000})
    assert schema_errors(SCHEMA, {"order_id": "123456789", "amount": -1, "extra": 1}) == {
        "amount": "-1 is less than the minimum of 0.01",
        "extra": "not an argument of this tool",
        "order_id": "'123456789' is too long",
    }
    assert schema_errors(SCHEMA, {"order_id": "1"}) == {"amount": "required"}


async def test_invalid_schema_fails_closed_and_edits_follow_the_snapshot(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    svc = ApprovalService.from_config(CONFIG, store=store, clock=FakeClock())
    gate = ToolGate(svc)
    bad = ToolCall("refund", {"order_id": "1", "amount": 5}, session="s", framework="x", schema={"type": "nope"})
    with pytest.raises(InvalidInput):
        await gate.check(bad)
    assert (await store.approvals.list_pending()).items == []
    ticket = await gate.check(
        ToolCall("refund", {"order_id": "1", "amount": 5}, session="s", framework="x", schema=SCHEMA)
    )
    assert ticket.approval is not None and ticket.approval.args_schema == SCHEMA
    with pytest.raises(InvalidInput, match="amount"):
        await svc.decide(
            DecideRequest(ticket.approval.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "1", "amount": 0})
        )
    fixed = ToolCall("refund", {"order_id": "2", "amount": 5}, session="s", framework="ask", modifiable=False)
    held = await gate.check(fixed)
    assert held.approval is not None and not held.approval.modifiable
    with pytest.raises(InvalidInput, match="cannot be modified"):
        await svc.decide(
            DecideRequest(held.approval.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "2", "amount": 1})
        )
    refusals = [e for e in await store.audit.entries(approval_id=held.approval.id) if e.event == "refused"]
    assert refusals and "cannot be modified" in refusals[-1].detail
    await store.close()
