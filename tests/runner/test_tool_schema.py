"""One schema language: a workflow tool's JSON Schema comes from its signature or its YAML, is snapshotted on its
approvals, and edits are judged by it; the 0.x per-argument form is refused with what to write instead."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from hitl.engine.agents.ask import ActionRejected, Approvals
from hitl.engine.config.hitl_yaml import load_config, parse_config
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest, ProposeRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.execution.schema import ToolSchema, signature_schema
from hitl.engine.runner.executor import Runner
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.testing import FakeClock
from tests.waiting import eventually

EXAMPLE = Path(__file__).parents[2] / "examples" / "refund"


def _refund(
    order_id: Annotated[str, Field(max_length=32)],
    amount: Annotated[float, Field(gt=0, le=10_000, description="Amount to refund")],
    reason: str = "",
    mode: Literal["card", "credit"] = "card",
    *,
    idempotency_key: str,
) -> None:
    """A tool as a user writes it."""


def test_the_schema_comes_from_the_signature_with_its_constraints() -> None:
    schema = signature_schema("refund", _refund)
    assert schema["required"] == ["order_id", "amount"] and schema["additionalProperties"] is False
    props = schema["properties"]
    assert "idempotency_key" not in props  # hitl's, not the caller's
    assert props["order_id"]["maxLength"] == 32
    assert props["amount"]["exclusiveMinimum"] == 0 and props["amount"]["maximum"] == 10_000
    assert props["amount"]["description"] == "Amount to refund"
    assert props["mode"]["enum"] == ["card", "credit"] and props["reason"]["default"] == ""

    def open_ended(target: str, **extra: Any) -> None: ...

    assert signature_schema("open", open_ended)["additionalProperties"] is True


def test_text_is_coerced_defaults_filled_and_every_bad_field_named() -> None:
    tool = ToolSchema("refund", signature_schema("refund", _refund))
    assert tool.validate({"order_id": "78291", "amount": "60"}) == {
        "order_id": "78291",
        "amount": 60,
        "reason": "",
        "mode": "card",
    }
    assert tool.validate({"order_id": "1", "amount": "12.5", "mode": "credit"})["amount"] == 12.5
    with pytest.raises(InvalidInput) as caught:
        tool.validate({"order_id": "x" * 40, "amount": "lots", "mode": "cash", "extra": 1})
    assert set(caught.value.context["fields"]) == {"order_id", "amount", "mode", "extra"}
    assert tool.errors({"order_id": "1"}) == {"amount": "required"}


def test_signatures_that_cannot_be_described_say_to_declare_a_schema() -> None:
    def positional(x: int, /) -> None: ...

    def unknown(x: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(InvalidInput, match="positional-only"):
        signature_schema("p", positional)
    with pytest.raises(InvalidInput, match="declare its arguments under schema:"):
        signature_schema("u", unknown)


def _workflow(tmp_path: Path, tools: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(f"name: w\ntools:\n{tools}\nsteps:\n  - {{id: s, tool: t, args: {{x: 1}}}}\n")
    return path


def test_the_old_per_argument_form_is_refused_with_what_to_write(tmp_path: Path) -> None:
    old = "  t:\n    function: tools:t\n    schema:\n      x: {type: integer, max_length: 3}"
    with pytest.raises(EngineError) as caught:
        load_workflow(_workflow(tmp_path, old))
    assert caught.value.code is ErrorCode.WORKFLOW_INVALID
    assert "JSON Schema" in caught.value.message and "properties" in caught.value.message
    bad = "  t:\n    function: tools:t\n    schema: {type: object, properties: {x: {type: money}}}"
    with pytest.raises(EngineError, match="not valid JSON Schema"):
        load_workflow(_workflow(tmp_path, bad))
    with pytest.raises(EngineError) as policy:
        parse_config("policy: {tools: {t: {schema: {x: {type: string}}}}}")
    assert policy.value.code is ErrorCode.POLICY_INVALID and "JSON Schema" in policy.value.message


async def test_a_tool_whose_signature_cannot_be_described_fails_the_run_before_anything_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "tools.py").write_text("def t(x, /):\n    raise AssertionError('never runs')\n")
    wf = load_workflow(_workflow(tmp_path, "  t: {function: 'tools:t'}"))
    svc = ApprovalService.from_config(parse_config(""), store=SqliteStore(tmp_path / "s.db"), clock=FakeClock())
    with pytest.raises(EngineError) as caught:
        await Runner(svc).start(wf, {})
    assert caught.value.code is ErrorCode.WORKFLOW_INVALID and "positional-only" in caught.value.message


async def test_the_refund_example_snapshots_its_signature_schema_and_judges_edits_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's example end to end: --var text becomes a number, the approval carries the signature's schema,
    an edit that breaks it changes nothing, a valid edit is what runs."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    svc = ApprovalService.from_config(
        load_config(EXAMPLE / "hitl.yaml"), store=SqliteStore(tmp_path / "s.db"), clock=FakeClock()
    )
    runner = Runner(svc)
    wf = load_workflow(EXAMPLE / "workflow.yaml")
    r = await runner.start(wf, {"order_id": "78291", "amount": "120", "note": "please"})
    assert r.status is RunStatus.PAUSED and r.approval is not None
    a = r.approval
    assert a.args["amount"] == 120 and a.args["reason"] == "customer request"
    schema = a.args_schema
    assert schema is not None and schema["properties"]["amount"]["maximum"] == 10_000
    assert schema["properties"]["reason"]["x-multiline"] is True
    for bad in ({**a.args, "amount": -5}, {**a.args, "amount": "sixty"}, {**a.args, "note": "x"}):
        with pytest.raises(InvalidInput):
            await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args=bad))
    assert (await svc.store.approvals.get(a.id)).status is Status.PENDING
    await svc.decide(DecideRequest(a.id, "U_SUPPORT1", DecisionKind.MODIFY, args={**a.args, "amount": 60}))
    done = await runner.resume(r.session_id)
    assert done.status is RunStatus.COMPLETED and done.outputs["refund"]["amount"] == 60


async def test_approvals_asked_without_a_schema_carry_the_one_hitl_yaml_declares(tmp_path: Path) -> None:
    config = load_config(EXAMPLE / "hitl.yaml")
    svc = ApprovalService.from_config(config, store=SqliteStore(tmp_path / "s.db"), clock=FakeClock())
    prop = await svc.propose(
        ProposeRequest("refund", {"order_id": "1", "customer_id": "C", "amount": 5}, session_id="s")
    )
    assert prop.approval is not None
    assert prop.approval.args_schema == config.policy.tools["refund"].schema_
    with pytest.raises(InvalidInput, match="amount"):  # the edit removes a required field (a merge patch's null)
        await svc.decide(DecideRequest(prop.approval.id, "U_SUPPORT1", DecisionKind.MODIFY, args={"amount": None}))


async def test_guarded_functions_snapshot_their_signature(tmp_path: Path) -> None:
    config = parse_config("roles: {ops: [U_OPS]}\npolicy: {tools: {refund: {tier: approve, role: ops}}}")
    svc = ApprovalService.from_config(config, store=SqliteStore(tmp_path / "s.db"), clock=FakeClock())
    approvals = Approvals(svc)

    @approvals.guard("refund", session="s")
    def refund(order_id: Annotated[str, Field(max_length=8)], amount: float) -> str:
        raise AssertionError("rejected: never runs")

    call = asyncio.ensure_future(refund("1", 5))

    async def proposed() -> list[Approval]:
        return (await svc.store.approvals.list_pending()).items

    pending = await eventually(proposed, what="the guarded call's approval")
    [a] = pending
    assert a.args_schema is not None and a.args_schema["properties"]["order_id"]["maxLength"] == 8
    await svc.decide(DecideRequest(a.id, "U_OPS", DecisionKind.REJECT, reason="no"))
    with pytest.raises(ActionRejected, match="no"):
        await call
