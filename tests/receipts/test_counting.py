"""Nothing runs past the policy's counting rules through ``hitl serve``'s API: every call that may run without a
person (``POST /proposals``, ``POST /receipts/allowed``) is counted by velocity and rolling-sum rules, also when ten
ask at once, on every store; a replay of the same call counts once and gets the same receipt; and a receipt is
redeemed only by a token that may redeem it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl import ApprovalService, load_config
from hitl.api import token_hash
from hitl.engine.agents.gate import ToolCall, ToolGate
from hitl.engine.clocks import FakeClock
from hitl.receipts import KeySet, verify
from hitl.receipts.signing import new_key_pem
from tests.backends import BACKENDS
from tests.bot.conftest import Harness, harness_on

AGENT, BANK, BANK_TOO, LEDGER = "tok-agent-count", "tok-bank", "tok-bank-too", "tok-ledger-only"
RILEY, FIN1 = "tok-riley-process", "tok-fin1-count"
"""The token of an agent process proposing in-process as ``hitl.yaml``'s requester (its receipts come through it)."""
CONFIG = f"""
requester: agent:riley
roles:
  finance: [U_FIN1, U_FIN2]
policy:
  tools:
    transfer: {{tier: auto}}
    spend: {{tier: auto}}
  rules:
    - name: burst
      tools: [transfer]
      velocity: {{subject: args.to, max: 3, window: 1h}}
      tier: approve
      role: finance
    - name: budget
      tools: [spend]
      rolling_sum: {{subject: args.to, value: args.n, threshold: 100, window: 1h}}
      tier: approve
      role: finance
receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    transfer: {{audience: bank, always: true}}
    spend: {{audience: bank, always: true}}
api:
  tokens:
    - {{name: agent, sha256: {token_hash(AGENT)}, reviewer: "agent:payer", scopes: [propose, read]}}
    - {{name: riley, sha256: {token_hash(RILEY)}, reviewer: "agent:riley", scopes: [propose]}}
    - {{name: fin1, sha256: {token_hash(FIN1)}, reviewer: U_FIN1, scopes: [read, decide]}}
    - {{name: bank, sha256: {token_hash(BANK)}, reviewer: svc:bank, scopes: [redeem], audience: bank}}
    - {{name: bank-too, sha256: {token_hash(BANK_TOO)}, reviewer: svc:bank2, scopes: [redeem], audience: bank}}
    - {{name: ledger, sha256: {token_hash(LEDGER)}, reviewer: svc:ledger, scopes: [redeem], audience: bank,
        tools: [spend]}}
"""


@pytest.fixture(params=BACKENDS)
async def hitl(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """``hitl serve`` on each store, signing with ``tmp_path/receipt.pem``."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with harness_on(request, tmp_path, clock, CONFIG) as h:
        yield h


async def post(h: Harness, path: str, body: dict[str, Any], token: str = AGENT) -> tuple[int, Any]:
    """One POST to ``hitl serve``'s API: its status and JSON."""
    headers = {"Authorization": f"Bearer {token}"}
    async with h.http.post(f"{h.bot_url}/api/v1{path}", json=body, headers=headers) as r:
        return r.status, await r.json()


def allowed(tool: str, args: dict[str, Any], scope: str) -> dict[str, Any]:
    """A ``/receipts/allowed`` body for the agent's call named ``scope``."""
    return {"tool": tool, "args": args, "session": "chat-7", "scope": scope}


def proposal(tool: str, args: dict[str, Any], key: str) -> dict[str, Any]:
    """A ``/proposals`` body for the agent's call with the idempotency key ``key``."""
    return {"tool": tool, "args": args, "session": "chat-7", "idempotency_key": key}


async def test_receipts_for_allowed_calls_are_counted_by_velocity_also_ten_at_once(hitl: Harness) -> None:
    to_v1 = {"to": "V-1", "amount": 5}
    answers = await asyncio.gather(
        *(post(hitl, "/receipts/allowed", allowed("transfer", to_v1, f"s{i}")) for i in range(10))
    )
    assert sorted(status for status, _ in answers) == [200] * 3 + [409] * 7, answers
    refused = [a for status, a in answers if status == 409]
    assert {a["error"]["code"] for a in refused} == {"propose_first"}
    assert "propose it" in refused[0]["error"]["message"]
    receipts = [a["receipt"] for status, a in answers if status == 200]
    async with hitl.http.get(f"{hitl.bot_url}/.well-known/jwks.json") as published:
        keys = KeySet(await published.json(content_type=None))
    now = hitl.clock.now()
    subjects = {verify(r, tool="transfer", args=to_v1, keys=keys, audience="bank", now=now)["sub"] for r in receipts}
    assert len(subjects) == 3  # three calls, three receipts

    # The refused calls were counted: the agent's proposal of another call for V-1 goes to a person, through the
    # same API, and so does the proposal of a refused call under its own scope.
    status, fourth = await post(hitl, "/proposals", proposal("transfer", to_v1, "p-1"))
    assert status == 200 and fourth["verdict"] == "pending" and fourth["approval"]["rule"] == "burst"
    # Another subject is counted apart.
    status, other = await post(hitl, "/receipts/allowed", allowed("transfer", {"to": "V-2", "amount": 5}, "s0"))
    assert status == 200 and other["basis"] == "policy"


async def test_the_same_call_asked_again_counts_once_and_gets_the_same_receipt(hitl: Harness) -> None:
    to_v3 = {"to": "V-3", "amount": 5}
    first = await post(hitl, "/receipts/allowed", allowed("transfer", to_v3, "call-a"))
    again = await asyncio.gather(
        *(post(hitl, "/receipts/allowed", allowed("transfer", to_v3, "call-a")) for _ in range(4))
    )
    assert first[0] == 200 and [status for status, _ in again] == [200] * 4, (first, again)
    assert {a["receipt"] for _, a in again} == {first[1]["receipt"]}
    # Counted once: two more calls run, the one after them needs a person.
    statuses = [(await post(hitl, "/receipts/allowed", allowed("transfer", to_v3, f"call-{c}")))[0] for c in "bcd"]
    assert statuses == [200, 200, 409]


async def test_proposals_that_run_without_a_person_are_counted_ten_at_once(hitl: Harness) -> None:
    to_v4 = {"to": "V-4", "amount": 5}
    answers = await asyncio.gather(*(post(hitl, "/proposals", proposal("transfer", to_v4, f"k{i}")) for i in range(10)))
    assert all(status == 200 for status, _ in answers), answers
    verdicts = sorted(a["verdict"] for _, a in answers)
    assert verdicts == ["pending"] * 7 + ["run"] * 3
    assert all(a["receipt"] for _, a in answers if a["verdict"] == "run")
    # Its receipt path agrees: the call a proposal counted and let run gets its receipt; a new one does not.
    status, _ = await post(hitl, "/receipts/allowed", allowed("transfer", to_v4, "another"))
    assert status == 409


async def test_a_rolling_sum_counts_every_allowed_call(hitl: Harness) -> None:
    sixty = {"to": "V-5", "n": 60}
    first = await post(hitl, "/receipts/allowed", allowed("spend", sixty, "r1"))
    second = await post(hitl, "/receipts/allowed", allowed("spend", sixty, "r2"))
    assert first[0] == 200 and (second[0], second[1]["error"]["code"]) == (409, "propose_first")
    status, third = await post(hitl, "/proposals", proposal("spend", sixty, "r3"))
    assert status == 200 and third["verdict"] == "pending" and third["approval"]["rule"] == "budget"
    # Ten at once on a fresh subject: one fits under 100, nine do not.
    answers = await asyncio.gather(
        *(post(hitl, "/receipts/allowed", allowed("spend", {"to": "V-6", "n": 60}, f"q{i}")) for i in range(10))
    )
    assert sorted(status for status, _ in answers) == [200] + [409] * 9


async def test_redeem_respects_the_token(hitl: Harness) -> None:
    status, got = await post(hitl, "/receipts/allowed", allowed("transfer", {"to": "V-7", "amount": 1}, "x"))
    assert status == 200, got
    receipt = got["receipt"]
    # A token limited to other tools cannot spend it, and spends nothing trying.
    status, refused = await post(hitl, "/receipts/redeem", {"receipt": receipt, "redemption": "r-1"}, LEDGER)
    assert (status, refused["error"]["code"]) == (403, "tool_not_allowed")
    status, spent = await post(hitl, "/receipts/redeem", {"receipt": receipt, "redemption": "r-1"}, BANK)
    assert status == 200 and spent["first"] is True
    # The redemption id is the first token's: the same token again is a retry, another token is another use.
    status, retried = await post(hitl, "/receipts/redeem", {"receipt": receipt, "redemption": "r-1"}, BANK)
    assert status == 200 and retried["first"] is False
    status, other = await post(hitl, "/receipts/redeem", {"receipt": receipt, "redemption": "r-1"}, BANK_TOO)
    assert (status, other["error"]["code"]) == (409, "already_redeemed")


async def test_a_call_asked_again_after_it_ran_never_uncounts_it(hitl: Harness) -> None:
    """The same call (its idempotency key) asked again is judged as it was first judged: a call that ran runs again
    under the same receipt, and no approval ever takes over its count, so rejecting one cannot free a place."""
    to_v8 = {"to": "V-8", "amount": 5}
    ran = [await post(hitl, "/proposals", proposal("transfer", to_v8, f"c{i}")) for i in (1, 2, 3)]
    assert [a["verdict"] for _, a in ran] == ["run"] * 3
    status, fourth = await post(hitl, "/proposals", proposal("transfer", to_v8, "c4"))
    assert fourth["verdict"] == "pending"
    status, again = await post(hitl, "/proposals", proposal("transfer", to_v8, "c1"))
    assert (status, again["verdict"], again["receipt"]) == (200, "run", ran[0][1]["receipt"])
    pending = fourth["approval"]
    decision = {"decision": "reject", "expected_version": pending["version"], "action_hash": pending["action_hash"]}
    status, _ = await post(hitl, f"/approvals/{pending['id']}/decisions", {**decision, "reason": "no"}, FIN1)
    assert status == 200
    status, fifth = await post(hitl, "/proposals", proposal("transfer", to_v8, "c5"))
    assert fifth["verdict"] == "pending"  # c1, c2, c3 still fill the window


async def test_an_agent_process_gets_receipts_for_exactly_the_calls_it_was_let_run(
    hitl: Harness, tmp_path: Path
) -> None:
    """An agent process counts its calls in-process and gets their receipts from hitl serve, which counts the same
    calls once and judges each as it was judged when counted: calls asked at once, three receipts, one for a person."""
    service = ApprovalService.from_config(
        load_config(tmp_path / "hitl.yaml"),
        store=hitl.rt.lifecycle.store,
        clock=hitl.clock,
        environ={"HITL_API_URL": hitl.bot_url, "HITL_TOKEN": RILEY},
        config_path=str(tmp_path / "hitl.yaml"),
    )
    gate = ToolGate(service, worker_id="agent-process")
    calls = [
        ToolCall("transfer", {"to": "V-9", "amount": 5}, session="chat-9", framework="fw", call_id=f"t{i}")
        for i in range(4)
    ]
    tickets = await asyncio.gather(*(gate.check(c) for c in calls))
    assert sorted(t.outcome for t in tickets) == ["pending", "run", "run", "run"]
    begun = [await gate.begin(t) for t in tickets if t.runs]
    assert len({t.receipt for t in begun}) == 3 and all(t.receipt for t in begun)
