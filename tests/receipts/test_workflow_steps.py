"""Receipts for workflow steps: where ``hitl serve`` runs an approved step (it resumes the run after the decision),
the run's own commit claims the step and records the receipt in the same atomic step; a batch's items each get
one naming the approval and the item's index. Elsewhere (a process without the key) the step does not run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.clocks import FakeClock
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.receipts import KeySet, verify
from hitl.receipts.signing import new_key_pem
from tests.api.cli_process import hitl as cli
from tests.bot.conftest import Harness, start, stop
from tests.ports import free_port

CONFIG = """
requester: agent:riley
roles:
  finance: [U_FIN1, U_FIN2]
policy:
  tools:
    pay: {tier: approve, role: finance}
receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    pay: {audience: payments}
"""
WORKFLOW = """
name: payouts
vars:
  vendors: "V-1,V-2,V-3"
tools:
  pay: {function: "tools:pay", idempotent: true}
steps:
  - id: first
    tool: pay
    args: {to: "V-0", amount: 10}
  - id: each
    tool: pay
    for_each: "vars.vendors.split(',')"
    as: vendor
    args: {to: "{{ vendor }}", amount: 5}
"""
TOOLS = """
import json
from pathlib import Path


def pay(to: str, amount: int, *, idempotency_key: str, receipt: str | None = None) -> dict:
    with (Path(__file__).parent / "paid.jsonl").open("a") as f:
        f.write(json.dumps({"to": to, "amount": amount, "receipt": receipt}) + "\\n")
    return {"paid": to}
"""


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    (tmp_path / "payouts.yaml").write_text(WORKFLOW)
    (tmp_path / "tools.py").write_text(TOOLS)
    h = await start(SqliteStore(tmp_path / "hitl.db"), clock, config=tmp_path / "hitl.yaml")
    try:
        yield h
    finally:
        await stop(h)


async def _approve_and_resume(h: Harness, approval_id: str) -> None:
    """A finance reviewer approves; ``hitl serve`` resumes the run (its queued job), running the step."""
    await h.svc.decide(DecideRequest(approval_id, "U_FIN1", DecisionKind.APPROVE, via="slack"))
    assert await h.rt.lifecycle.process_jobs() == 1


async def test_steps_hitl_serve_runs_get_receipts_and_a_batchs_items_each_name_their_index(
    served: Harness, tmp_path: Path, clock: FakeClock
) -> None:
    h = served
    flow = load_workflow(tmp_path / "payouts.yaml")
    runner = h.rt.runtime.contexts.for_workflow(flow).runner
    started = await runner.start(flow, {}, config_path=str(tmp_path / "hitl.yaml"))
    assert started.status is RunStatus.PAUSED and started.approval is not None
    first = started.approval
    await _approve_and_resume(h, first.id)
    state = await runner.load(started.session_id)
    assert state.status is RunStatus.PAUSED  # now on the batch's one approval
    assert state.waiting is not None
    batch = await h.svc.store.approvals.get(state.waiting)
    await _approve_and_resume(h, batch.id)
    assert (await runner.load(started.session_id)).status is RunStatus.COMPLETED

    async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as published:
        keys = KeySet(await published.json(content_type=None))
    paid: list[dict[str, Any]] = [json.loads(line) for line in (tmp_path / "paid.jsonl").read_text().splitlines()]
    assert [p["to"] for p in paid] == ["V-0", "V-1", "V-2", "V-3"]
    subjects = []
    for p in paid:
        args = {"to": p["to"], "amount": p["amount"]}
        claims = verify(p["receipt"], tool="pay", args=args, keys=keys, audience="payments", now=clock.now())
        subjects.append(claims["sub"])
        assert await h.svc.store.receipts.issued(claims["jti"]) is not None  # recorded by the run's commit
    assert subjects == [first.id, f"{batch.id}#0", f"{batch.id}#1", f"{batch.id}#2"]
    assert (await h.svc.store.approvals.get(batch.id)).status is Status.EXECUTED


async def test_a_process_without_the_key_does_not_run_the_approved_step(
    served: Harness, tmp_path: Path, clock: FakeClock
) -> None:
    from hitl.engine.runtime.compose import compose

    flow = load_workflow(tmp_path / "payouts.yaml")
    # `hitl run` in its own process: no key, hitl serve only over the API (here: not set at all).
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        elsewhere = compose(store=store, clock=clock, config_path=str(tmp_path / "hitl.yaml"), workflow=flow)
        started = await elsewhere.runner.start(flow, {}, config_path=str(tmp_path / "hitl.yaml"))
        assert started.approval is not None
        await elsewhere.service.decide(DecideRequest(started.approval.id, "U_FIN1", DecisionKind.APPROVE, via="slack"))
        with pytest.raises(EngineError) as refused:
            await elsewhere.runner.resume(started.session_id)
        assert refused.value.code is ErrorCode.RECEIPT_UNAVAILABLE
        assert not (tmp_path / "paid.jsonl").exists()
        assert await store.ledger.get(f"{started.session_id}:first:0") is None  # nothing claimed
    finally:
        await store.close()
    # The refused process stopped mid-run; once its lease runs out, hitl serve recovers the run and the step runs
    # there, once, with its receipt.
    await served.rt.lifecycle.process_jobs()  # the decision's resume: the run was taken, so it is moot
    clock.advance(120)
    assert await served.rt.lifecycle.recover() == 1
    assert await served.rt.lifecycle.process_jobs() == 1
    (paid,) = [json.loads(line) for line in (tmp_path / "paid.jsonl").read_text().splitlines()]
    assert paid["to"] == "V-0" and paid["receipt"]


async def test_hitl_run_in_its_own_process_claims_through_hitl_serve_and_so_does_not_run_the_step(
    tmp_path: Path,
) -> None:
    """``hitl run`` holds no key: the CLI hands the engine its way to ``hitl serve`` (``HITL_API_URL``,
    ``HITL_TOKEN``), which signs no workflow step's receipt for a run this process commits, so the approved step
    does not run here and the refusal says where it will."""
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    (tmp_path / "payouts.yaml").write_text(WORKFLOW)
    (tmp_path / "tools.py").write_text(TOOLS)
    env = {
        "HITL_STORE": f"sqlite:///{tmp_path / 'hitl.db'}",
        "HITL_CONFIG": str(tmp_path / "hitl.yaml"),
        "HITL_API_URL": f"http://127.0.0.1:{free_port()}",
        "HITL_TOKEN": "tok-agent",
    }
    code, _, err = await cli("run", str(tmp_path / "payouts.yaml"), "--auto-approve", env=env)
    assert code == 1 and "receipt_unavailable" in err, err
    assert "only hitl serve holds the key" in err and "Let hitl serve resume the run" in err, err
    assert not (tmp_path / "paid.jsonl").exists()
