"""Key custody: only ``hitl serve`` signs. An agent process (``ask``, ``guard``) on the same store claims its
approved executions through ``hitl serve``'s API (``HITL_API_URL``, ``HITL_TOKEN``) and gets their receipts that
way; with ``hitl serve`` out of reach nothing runs; under ``production: true`` an agent process that could read the
key does not start."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl import Approvals, ApprovalService, EngineError, ErrorCode, SystemClock, load_config, parse_config
from hitl.engine.agents.gate import ToolCall
from hitl.engine.errors import PolicyError
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts import KeySet, verify
from hitl.receipts.signing import new_key_pem
from tests.api.cli_process import hitl as cli
from tests.bot.conftest import Harness
from tests.ports import free_port
from tests.receipts.conftest import AGENT, AGENT_PROCESS, CONFIG, FIN1, Payments, api, approve, own_connection
from tests.waiting import eventually

PAYMENT = {"to": "V-1", "amount": 120}


@pytest.fixture
async def agent_store(hitl: Harness, tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """The agent process's own connection to the store ``hitl serve`` uses."""
    async with own_connection(tmp_path) as store:
        yield store


def _agent(store: SqliteStore, tmp_path: Path, environ: dict[str, str]) -> Approvals:
    config = tmp_path / "hitl.yaml"
    service = ApprovalService.from_config(
        load_config(config), store=store, clock=SystemClock(), environ=environ, config_path=str(config)
    )
    return Approvals(service, wait=60)


async def _keys(h: Harness) -> KeySet:
    async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as published:
        return KeySet(await published.json(content_type=None))


async def _approve_next(h: Harness, *, kind: str = "approve") -> dict[str, Any]:
    """Wait for the agent's pending payment, and approve it as a finance reviewer."""

    async def pending() -> dict[str, Any] | None:
        page = await api(h, "GET", "/approvals?status=pending&tool=pay", FIN1)
        return page["items"][0] if page["items"] else None

    approval: dict[str, Any] = await eventually(pending, what="the agent's payment to wait for a reviewer")
    await approve(h, approval, kind=kind)
    return approval


def _pay(url: str, args: dict[str, Any], receipt: str | None) -> dict[str, Any]:
    """What the agent's payment tool does: call the payment service, with the receipt it was given."""
    request = urllib.request.Request(
        f"{url}/pay",
        data=json.dumps(args).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **({"Hitl-Receipt": receipt} if receipt else {})},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the test's own service
        return dict(json.loads(response.read()))


async def test_an_agent_process_gets_its_receipts_from_hitl_serve(
    hitl: Harness, payments: Payments, agent_store: SqliteStore, tmp_path: Path
) -> None:
    approvals = _agent(agent_store, tmp_path, {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": AGENT_PROCESS})
    keys = await _keys(hitl)

    # ask: the answer carries the receipt; the agent passes it to the protected system.
    asked = asyncio.create_task(approvals.ask("pay", PAYMENT, session="ses_agent", call_id="call-1"))
    first = await _approve_next(hitl)
    answer = await asked
    assert answer.approved and answer.receipt is not None
    claims = verify(answer.receipt, tool="pay", args=PAYMENT, keys=keys, audience="payments")
    assert claims["sub"] == first["id"] and claims["approvers"] == ["U_FIN1"]
    assert (await asyncio.to_thread(_pay, payments.url, PAYMENT, answer.receipt))["paid"]

    # guard: the tool names a `receipt` parameter, which is no argument of the call (not in the schema or hash).
    seen: list[str | None] = []

    @approvals.guard("pay", session="ses_agent")
    def pay(to: str, amount: int, *, receipt: str | None = None) -> dict[str, Any]:
        seen.append(receipt)
        return _pay(payments.url, {"to": to, "amount": amount}, receipt)

    guarded = asyncio.create_task(pay("V-2", 80))
    second = await _approve_next(hitl)
    assert second["args"] == {"to": "V-2", "amount": 80}
    assert (await guarded)["paid"] and seen[0] is not None

    assert [p["args"] for p in payments.paid()] == [PAYMENT, {"to": "V-2", "amount": 80}]
    # hitl serve claimed each execution for the agent's own holder, which recorded the outcome in the store.
    claim = await agent_store.ledger.get(f"call:{second['id']}")
    assert claim is not None and claim.holder == approvals.gate.worker_id and claim.state == "succeeded"


@pytest.mark.parametrize("reach", ["nothing listening", "no HITL_API_URL"])
async def test_with_hitl_serve_out_of_reach_nothing_runs(
    hitl: Harness, agent_store: SqliteStore, tmp_path: Path, reach: str
) -> None:
    nowhere = {"HITL_API_URL": f"http://127.0.0.1:{free_port()}", "HITL_TOKEN": AGENT_PROCESS}
    environ = nowhere if reach == "nothing listening" else {}
    approvals = _agent(agent_store, tmp_path, environ)
    ran: list[int] = []

    @approvals.guard("pay", session="ses_agent")
    def pay(to: str, amount: int, *, receipt: str | None = None) -> None:
        ran.append(amount)

    guarded = asyncio.create_task(pay("V-3", 30))
    approval = await _approve_next(hitl)
    with pytest.raises(EngineError) as refused:
        await guarded
    assert refused.value.code is ErrorCode.RECEIPT_UNAVAILABLE and "did not run" in refused.value.message
    assert ran == []
    assert await agent_store.ledger.get(f"call:{approval['id']}") is None  # nothing claimed: it may run later
    assert (await agent_store.approvals.get(approval["id"])).status == "approved"


def test_an_agent_process_that_could_read_the_key_does_not_start_in_production(tmp_path: Path) -> None:
    production = "production: true\n" + CONFIG
    pem = new_key_pem().decode()
    store: Any = object()  # never reached: the refusal comes first
    with_file = parse_config(production)
    (tmp_path / "receipt.pem").write_text(pem)
    with pytest.raises(PolicyError, match="only hitl serve may"):
        ApprovalService.from_config(
            with_file, store=store, clock=SystemClock(), environ={}, config_path=str(tmp_path / "hitl.yaml")
        )
    in_env = parse_config(production.replace("  key_file: receipt.pem\n", ""))
    with pytest.raises(PolicyError, match="HITL_RECEIPT_KEY"):
        ApprovalService.from_config(in_env, store=store, clock=SystemClock(), environ={"HITL_RECEIPT_KEY": pem})
    # Without the key within reach, the agent process starts, and asks hitl serve for its receipts.
    (tmp_path / "receipt.pem").unlink()
    started = ApprovalService.from_config(
        with_file, store=store, clock=SystemClock(), environ={}, config_path=str(tmp_path / "hitl.yaml")
    )
    assert started.receipts is not None


async def test_every_private_key_hitl_serve_publishes_keeps_an_agent_process_from_starting_in_production(
    tmp_path: Path,
) -> None:
    """Not only the key that signs: the next key and a previous key are published, so what their private halves
    sign verifies too (the documented rotation used to leave the old private key under previous); and the key in
    the environment counts even when key_file is named. Their public halves (`hitl keys public`) are harmless."""
    for name in ("old.pem", "next.pem"):
        code, _, err = await cli("keys", "new", "--out", str(tmp_path / name), env={})
        assert code == 0, err
    store: Any = object()  # never reached: the refusal comes first

    def agent(receipts: str, environ: dict[str, str]) -> ApprovalService:  # receipt.pem, which signs, is not there
        config = parse_config("production: true\n" + CONFIG.replace("  key_file: receipt.pem\n", receipts))
        path = str(tmp_path / "hitl.yaml")
        return ApprovalService.from_config(config, store=store, clock=SystemClock(), environ=environ, config_path=path)

    async def only_its_public_half(name: str) -> None:
        path = tmp_path / name
        code, _, err = await cli("keys", "public", str(path), "--out", f"{path}.pub", env={})
        assert code == 0, err
        os.replace(f"{path}.pub", path)

    rotated = "  key_file: receipt.pem\n  previous: [old.pem]\n"
    with pytest.raises(PolicyError, match=r"receipts.previous, .*old.pem.*hitl keys public old.pem") as refused:
        agent(rotated, {})
    assert refused.value.code is ErrorCode.POLICY_INVALID and "only hitl serve may" in refused.value.message
    await only_its_public_half("old.pem")
    with pytest.raises(PolicyError, match="the environment variable HITL_RECEIPT_KEY"):
        agent(rotated, {"HITL_RECEIPT_KEY": new_key_pem().decode()})
    rotating = "  key_file: receipt.pem\n  next: next.pem\n  previous: [old.pem]\n"
    with pytest.raises(PolicyError, match=r"receipts.next, .*next.pem.*hitl keys public next.pem"):
        agent(rotating, {})
    await only_its_public_half("next.pem")
    assert agent(rotating, {}).receipts is not None  # public halves only, and no key in its environment: it starts


async def test_calls_that_run_without_a_person_get_receipts_that_say_why(
    hitl: Harness, payments: Payments, agent_store: SqliteStore, tmp_path: Path
) -> None:
    approvals = _agent(agent_store, tmp_path, {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": AGENT_PROCESS})
    keys = await _keys(hitl)

    # The policy lets look_up run (receipts.tools.look_up.always): basis policy, approved by nobody.
    looked = await approvals.ask("look_up", {"order": "78291"}, session="ses_trust")
    assert looked.approved and looked.approval is None and looked.receipt is not None
    claims = verify(looked.receipt, tool="look_up", args={"order": "78291"}, keys=keys)
    assert claims["basis"] == "policy" and claims["approvers"] == [] and claims["sub"].startswith("allowed:")
    assert claims["requester"] == "agent:riley"

    # A reviewer trusts pay in this session: that call's basis is the approval, the next one's the Trust.
    asked = asyncio.create_task(approvals.ask("pay", PAYMENT, session="ses_trust", call_id="t-1"))
    await _approve_next(hitl, kind="trust")
    trusted = await asked
    assert trusted.receipt is not None
    assert verify(trusted.receipt, tool="pay", args=PAYMENT, keys=keys, audience="payments")["basis"] == "approval"
    smaller = {"to": "V-1", "amount": 50}
    later = await approvals.ask("pay", smaller, session="ses_trust", call_id="t-2")
    assert later.approved and later.approval is None and later.receipt is not None
    claims = verify(later.receipt, tool="pay", args=smaller, keys=keys, audience="payments")
    assert claims["basis"] == "trust" and claims["approvers"] == []
    assert (await asyncio.to_thread(_pay, payments.url, smaller, later.receipt))["paid"]
    assert [p["args"] for p in payments.paid()] == [smaller]


async def test_hitl_serve_signs_only_what_its_own_policy_lets_run_without_a_person(hitl: Harness) -> None:
    async def allowed(body: dict[str, Any], token: str = AGENT_PROCESS) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with hitl.http.post(f"{hitl.bot_url}/api/v1/receipts/allowed", json=body, headers=headers) as r:
            return r.status, await r.json()

    call = {"session": "ses_x", "scope": "ask:ses_x:-"}
    # pay needs a person, and nobody trusted it here: whatever the process says, no receipt.
    status, answer = await allowed({**call, "tool": "pay", "args": PAYMENT})
    assert (status, answer["error"]["code"]) == (409, "propose_first")
    # Receipts for allowed calls of a tool without `always` are not issued.
    status, answer = await allowed({**call, "tool": "refund", "args": PAYMENT})
    assert (status, answer["error"]["code"]) == (409, "not_covered")
    # A propose token asks only for its own identity.
    status, answer = await allowed({**call, "tool": "look_up", "args": {}, "requester": "agent:someone-else"})
    assert (status, answer["error"]["code"]) == (403, "not_eligible")
    status, answer = await allowed({**call, "tool": "look_up", "args": {"order": "1"}})
    assert status == 200 and answer["basis"] == "policy"
    # Arguments the tool's schema refuses are never signed (pay, trusted or not, takes a string `to`).
    status, answer = await allowed({**call, "tool": "pay", "args": {"to": 7, "amount": 1}})
    assert (status, answer["error"]["code"]) == (422, "invalid_input")

    # An agent on the API gets the receipt with its proposal's "run".
    proposal = {"session": "ses_api", "tool": "look_up", "args": {"order": "2"}, "idempotency_key": "k-1"}
    ran = await api(hitl, "POST", "/proposals", AGENT, proposal)
    assert ran["verdict"] == "run" and ran["receipt"]
    claims = verify(ran["receipt"], tool="look_up", args={"order": "2"}, keys=await _keys(hitl))
    assert claims["basis"] == "policy" and claims["requester"] == "agent:payer"


async def test_an_agent_process_is_told_a_withdrawn_approval_will_not_run(
    hitl: Harness, agent_store: SqliteStore, tmp_path: Path
) -> None:
    # Withdrawn between its approval and the agent's claim: hitl serve refuses the claim, and the agent process is
    # told the approval will not run (action_rejected), not that hitl serve was out of reach (a retry would not help).
    approvals = _agent(agent_store, tmp_path, {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": AGENT_PROCESS})
    call = ToolCall("pay", {"to": "V-4", "amount": 40}, session="ses_agent", framework="ask", call_id="call-w")
    pending = await approvals.gate.check(call)
    assert pending.pending and pending.approval is not None
    shown = await api(hitl, "GET", f"/approvals/{pending.approval.id}", FIN1)
    await approve(hitl, shown)
    await api(hitl, "POST", f"/approvals/{shown['id']}/withdrawal", FIN1, {"reason": "the vendor changed banks"})
    ticket = await approvals.gate.ticket_for(call, await agent_store.approvals.get(shown["id"]))
    assert ticket.runs
    with pytest.raises(EngineError) as refused:
        await approvals.gate.begin(ticket)
    assert refused.value.code is ErrorCode.ACTION_REJECTED and "withdrawn" in refused.value.message, refused.value
    assert not refused.value.code.retryable
    assert await agent_store.ledger.get(f"call:{shown['id']}") is None


async def test_an_agent_process_s_run_moves_its_approval_as_an_in_process_run_does(
    hitl: Harness, payments: Payments, agent_store: SqliteStore, tmp_path: Path
) -> None:
    # hitl serve's claim moved the approval to executing for the agent's holder: the agent process, holding that
    # claim, does not move it again (no second version, no second executing line), whatever copy it read before.
    approvals = _agent(agent_store, tmp_path, {"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": AGENT_PROCESS})

    @approvals.guard("pay", session="ses_agent")
    def pay(to: str, amount: int, *, receipt: str | None = None) -> dict[str, Any]:
        return _pay(payments.url, {"to": to, "amount": amount}, receipt)

    guarded = asyncio.create_task(pay("V-3", 30))
    asked = await _approve_next(hitl)
    assert (await guarded)["paid"]
    shown = await api(hitl, "GET", f"/approvals/{asked['id']}", FIN1)
    moves = [(e["event"], e["version"], e["actor"]) for e in shown["audit"] if e["event"] in ("executing", "executed")]
    approved = next(e["version"] for e in shown["audit"] if e["event"] == "decided")
    holder = approvals.gate.worker_id
    # As an in-process run moves it: approved at v, executing at v+1, executed at v+2, each once.
    assert moves == [("executing", approved + 1, holder), ("executed", approved + 2, holder)], shown["audit"]
    assert (shown["status"], shown["version"]) == ("executed", approved + 2)

    # ask: the agent's framework runs the call itself once told it may; its hand-over is one move too.
    answered = asyncio.create_task(approvals.ask("pay", {"to": "V-5", "amount": 50}, session="ses_agent"))
    asked = await _approve_next(hitl)
    assert (await answered).approved
    shown = await api(hitl, "GET", f"/approvals/{asked['id']}", FIN1)
    approved = next(e["version"] for e in shown["audit"] if e["event"] == "decided")
    moves = [(e["event"], e["version"], e["actor"]) for e in shown["audit"] if e["event"] == "executing"]
    assert moves == [("executing", approved + 1, holder)], shown["audit"]
