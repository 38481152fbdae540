"""``/receipts/claim`` hands an approved execution over as the API's own execution claim does, through a running
`hitl serve` on SQLite, Redis and PostgreSQL: of many processes claiming at once exactly one gets the go (and the
receipt), the approval moves to ``executing`` with it, and every other claimant is refused. A workflow step's
approval, which its run claims under its own key, is claimed by nobody else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hitl.api import token_hash
from hitl.engine.clocks import FakeClock
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Approval, DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.receipts.withdrawing import WithdrawRequest, withdraw_approval
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from hitl.receipts.signing import new_key_pem
from tests.backends import BACKENDS
from tests.bot.conftest import Harness, harness_on, start, stop
from tests.receipts.conftest import AGENT, CONFIG, api, approve
from tests.receipts.test_workflow_steps import CONFIG as STEPS
from tests.receipts.test_workflow_steps import TOOLS, WORKFLOW

CLAIMANTS = 12
WORKER = "tok-claim-worker"
"""A claim-scope token (a worker claiming executions for many requesters)."""


@pytest.fixture(params=BACKENDS)
async def served(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """``hitl serve`` with receipts on each store."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with harness_on(request, tmp_path, clock, CONFIG) as h:
        yield h


async def _claim(h: Harness, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {AGENT}"}
    async with h.http.post(f"{h.bot_url}/api/v1/receipts/claim", json=body, headers=headers) as r:
        return r.status, await r.json()


async def test_of_many_concurrent_receipt_claims_one_gets_the_go_and_the_approval_is_executing(
    served: Harness,
) -> None:
    proposal = {"session": "ses_c", "tool": "pay", "args": {"to": "V-9", "amount": 7}, "idempotency_key": "k-race"}
    pending = await api(served, "POST", "/proposals", AGENT, proposal)
    asked = pending["approval"]
    await approve(served, asked)
    approved = await api(served, "GET", f"/approvals/{asked['id']}", AGENT)
    assert approved["status"] == "approved", approved

    key, digest = pending["execution_key"], asked["execute_hash"]
    bodies = [{"key": key, "action_hash": digest, "holder": f"worker-{i}"} for i in range(CLAIMANTS)]
    answers = await asyncio.gather(*(_claim(served, b) for b in bodies))

    won = [a for status, a in answers if status == 200]
    assert len(won) == 1, answers
    assert won[0]["claim"]["acquired"] is True and won[0]["receipt"], won
    lost = sorted((status, a["error"]["code"]) for status, a in answers if status != 200)
    assert lost == [(409, "claim_in_progress")] * (CLAIMANTS - 1), lost

    after = await api(served, "GET", f"/approvals/{asked['id']}", AGENT)
    assert after["status"] == "executing", after
    assert after["version"] == approved["version"] + 1, (approved["version"], after["version"])
    moves = [e for e in after["audit"] if e["event"] == "executing"]
    assert [e["actor"] for e in moves] == [won[0]["claim"]["holder"]], moves

    # A late claimant finds it handed over: refused, and the approval does not move again.
    status, late = await _claim(served, {"key": key, "action_hash": digest, "holder": "worker-late"})
    assert status == 409 and late["error"]["code"] == "claim_in_progress", late
    assert (await api(served, "GET", f"/approvals/{asked['id']}", AGENT))["version"] == after["version"]


@asynccontextmanager
async def _payouts(tmp_path: Path, clock: FakeClock) -> AsyncIterator[tuple[Harness, Approval]]:
    """``hitl serve`` with receipts and a claim-scope token (:data:`WORKER`), and a payouts run paused on its first
    step's approval, which a finance reviewer approved (its resume job queued, not run yet)."""
    tokens = f"api:\n  tokens:\n    - {{name: worker, sha256: {token_hash(WORKER)}, reviewer: w, scopes: [claim]}}\n"
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    (tmp_path / "hitl.yaml").write_text(STEPS + tokens)
    (tmp_path / "payouts.yaml").write_text(WORKFLOW)
    (tmp_path / "tools.py").write_text(TOOLS)
    h = await start(SqliteStore(tmp_path / "hitl.db"), clock, config=tmp_path / "hitl.yaml")
    try:
        flow = load_workflow(tmp_path / "payouts.yaml")
        runner = h.rt.runtime.contexts.for_workflow(flow).runner
        started = await runner.start(flow, {}, config_path=str(tmp_path / "hitl.yaml"))
        assert started.approval is not None
        first = started.approval
        await h.svc.decide(DecideRequest(first.id, "U_FIN1", DecisionKind.APPROVE, via="slack"))
        yield h, first
    finally:
        await stop(h)


async def test_a_workflow_step_s_approval_is_not_claimed_under_another_key(tmp_path: Path, clock: FakeClock) -> None:
    # The run claims its approved step under its own key ({session}:{step}:{iteration}). A claim of the same
    # approval under `call:<id>` would be a second claim of one approval, with a second receipt: a second payment.
    async with _payouts(tmp_path, clock) as (h, first):
        body = {"key": f"call:{first.id}", "action_hash": action_hash(first.tool, first.execute_args), "holder": "x"}
        async with h.http.post(
            f"{h.bot_url}/api/v1/receipts/claim", json=body, headers={"Authorization": f"Bearer {WORKER}"}
        ) as r:
            status, answer = r.status, await r.json()
        assert status == 409 and answer["error"]["code"] == "handed_elsewhere", (status, answer)
        assert await h.svc.store.ledger.get(f"call:{first.id}") is None  # nothing claimed, no receipt issued
        assert await h.rt.lifecycle.process_jobs() == 1  # the run's own claim: the step runs, once
        paid = (tmp_path / "paid.jsonl").read_text().splitlines()
        assert len(paid) == 1, paid


async def test_a_withdrawn_workflow_step_does_not_run(tmp_path: Path, clock: FakeClock) -> None:
    # Withdrawn by its decider before the run resumed: the run's commit signs no receipt for it and claims nothing.
    async with _payouts(tmp_path, clock) as (h, first):
        asked = WithdrawRequest(first.id, "U_FIN1", "slack", "the vendor's bank details changed")
        await withdraw_approval(h.svc.store, clock, asked)
        await h.rt.lifecycle.process_jobs()
        assert not (tmp_path / "paid.jsonl").exists()
        assert await h.svc.store.ledger.get(f"{first.session_id}:first:0") is None
        assert (await h.svc.store.approvals.get(first.id)).status is Status.APPROVED
        stored = await h.svc.store.runs.load(first.session_id)
        assert stored is not None and stored.data["status"] == "failed", stored  # stopped, not waiting on it


async def test_a_claim_token_narrowed_by_roles_claims_only_approvals_within_them(
    tmp_path: Path, clock: FakeClock
) -> None:
    # A worker's claim token reaches any requester's approval of its tools; narrowed by `roles:`, only those its roles
    # decide, as its reads are narrowed: another role's approval is not there for it (404), and nothing is claimed.
    support, finance = "tok-claim-support", "tok-claim-finance"
    tokens = (
        f"    - {{name: ws, sha256: {token_hash(support)}, reviewer: ws, scopes: [claim], roles: [support]}}\n"
        f"    - {{name: wf, sha256: {token_hash(finance)}, reviewer: wf, scopes: [claim], roles: [finance]}}\n"
    )
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    (tmp_path / "hitl.yaml").write_text(CONFIG + tokens)
    h = await start(SqliteStore(tmp_path / "hitl.db"), clock, config=tmp_path / "hitl.yaml")
    try:
        proposal = {"session": "ses_r", "tool": "pay", "args": {"to": "V-3", "amount": 3}, "idempotency_key": "k-r"}
        pending = await api(h, "POST", "/proposals", AGENT, proposal)
        await approve(h, pending["approval"])
        body = {"key": pending["execution_key"], "action_hash": pending["approval"]["execute_hash"], "holder": "w"}

        async def claim(token: str) -> tuple[int, Any]:
            headers = {"Authorization": f"Bearer {token}"}
            async with h.http.post(f"{h.bot_url}/api/v1/receipts/claim", json=body, headers=headers) as r:
                return r.status, await r.json()

        status, refused = await claim(support)
        assert status == 404 and refused["error"]["code"] == "not_found", refused
        assert await h.svc.store.ledger.get(pending["execution_key"]) is None  # nothing claimed, no receipt
        status, claimed = await claim(finance)
        assert status == 200 and claimed["claim"]["acquired"] is True and claimed["receipt"], claimed
    finally:
        await stop(h)
