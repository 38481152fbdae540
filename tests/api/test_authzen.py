"""hitl as an AuthZEN decision point, through a real ``hitl serve`` on SQLite and Redis: a client written from the
OpenID AuthZEN Authorization API 1.0's own example bodies asks whether calls may run now; the answers are counted
as every other path counts them, bound to the token's subjects, and a malformed body changes nothing."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hitl.api import token_hash
from hitl.engine.clocks import FakeClock
from hitl.engine.storage.sqlite import SqliteStore
from hitl.receipts import KeySet, verify
from hitl.receipts.signing import new_key_pem
from tests.bot.conftest import Harness, harness_on, start, stop

GATEWAY, GATEWAY_FOR_TWO, FIN1, AGENT = "tok-gateway", "tok-gateway-two", "tok-fin1-authzen", "tok-agent-authzen"
ADMIN, NARROW = "tok-admin-authzen", "tok-gateway-narrow"
CONFIG = f"""
requester: agent:riley
roles:
  finance: [U_FIN1, U_FIN2]
policy:
  denied_tools: [wipe]
  tools:
    transfer: {{tier: auto, timeout: 10m}}
  rules:
    - name: burst
      tools: [transfer]
      velocity: {{subject: args.to, max: 3, window: 1h}}
      tier: approve
      role: finance
receipts:
  issuer: https://hitl.example.com
  key_file: receipt.pem
  tools:
    transfer: {{audience: bank, always: true}}
api:
  tokens:
    - {{name: gateway, sha256: {token_hash(GATEWAY)}, reviewer: "agent:gw", scopes: [evaluate]}}
    - {{name: gateway-two, sha256: {token_hash(GATEWAY_FOR_TWO)}, reviewer: "svc:gw2", scopes: [evaluate],
        subjects: ["agent:alice", "agent:bob"]}}
    - {{name: fin1, sha256: {token_hash(FIN1)}, reviewer: U_FIN1, scopes: [read, decide]}}
    - {{name: agent, sha256: {token_hash(AGENT)}, reviewer: "agent:gw", scopes: [propose, read]}}
    - {{name: admin, sha256: {token_hash(ADMIN)}, reviewer: U_FIN2, scopes: [admin]}}
    - {{name: narrow, sha256: {token_hash(NARROW)}, reviewer: "agent:alice", scopes: [evaluate], tools: [wipe]}}
"""

# The specification's own example bodies (OpenID AuthZEN Authorization API 1.0, "Access Evaluation API" and
# "Access Evaluations API"), as data: the client below fills hitl's names into exactly these shapes.
SPEC_EVALUATION: dict[str, Any] = {
    "subject": {"type": "user", "id": "alice@example.com", "properties": {"department": "Sales"}},
    "resource": {"type": "account", "id": "123"},
    "action": {"name": "can_read", "properties": {"method": "GET"}},
    "context": {"time": "1985-10-26T01:22-07:00"},
}
SPEC_EVALUATIONS: dict[str, Any] = {
    "subject": {"type": "user", "id": "alice@example.com"},
    "action": {"name": "can_read"},
    "options": {"evaluations_semantic": "execute_all"},
    "evaluations": [
        {"resource": {"type": "document", "id": "boxcarring.md"}},
        {"resource": {"type": "document", "id": "subject-search.md"}},
        {"action": {"name": "can_edit"}, "resource": {"type": "document", "id": "resource-search.md"}},
    ],
}

TO_V1 = {"to": "V-1", "amount": 5}


@pytest.fixture(params=("sqlite", "redis"))
async def hitl(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Harness]:
    """``hitl serve`` on SQLite and on Redis (one shared store), signing receipts with ``tmp_path/receipt.pem``."""
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with harness_on(request, tmp_path, clock, CONFIG) as h:
        yield h


def evaluation(
    args: dict[str, Any], request_id: str | None = None, *, subject: str = "agent:gw", tool: str = "transfer"
) -> dict[str, Any]:
    """The spec's evaluation example, asking for ``subject``'s call of ``tool`` with ``args``."""
    body = copy.deepcopy(SPEC_EVALUATION)
    body["subject"]["id"] = subject
    body["resource"] = {"type": "tool", "id": tool}
    body["action"] = {"name": "call", "properties": body["action"]["properties"]}
    body["context"] = {**body["context"], "arguments": args, "session": "gw-1"}
    if request_id is not None:
        body["context"]["request_id"] = request_id
    return body


async def refusal(r: aiohttp.ClientResponse) -> dict[str, Any]:
    """An AuthZEN error as the standard shapes it, a message string (its code first, the code alone in
    ``X-Hitl-Error``), read back as ``{"error": {"code", "message"}}`` for the assertions."""
    text = await r.text()
    code = r.headers["X-Hitl-Error"]
    assert r.content_type == "text/plain" and text.startswith(f"{code}: "), (r.content_type, text)
    return {"error": {"code": code, "message": text.removeprefix(f"{code}: ")}}


async def ask(h: Harness, path: str, body: Any, token: str = GATEWAY, **kw: Any) -> tuple[int, Any]:
    """One request: its status and JSON (an AuthZEN error: its message string, read by :func:`refusal`)."""
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
    async with h.http.request(kw.pop("method", "POST"), f"{h.bot_url}{path}", json=body, headers=headers, **kw) as r:
        if r.status >= 400 and path.startswith("/access/"):
            return r.status, await refusal(r)
        return r.status, await r.json(content_type=None)


async def held_call(h: Harness, request_id: str, fillers: str) -> tuple[str, Any]:
    """The velocity of three used up (by request ids ``fillers`` + 0, 1, 2), the call ``request_id`` is held: its
    approval's id, and that approval as U_FIN1 reads it over the API."""
    for i in range(3):
        await ask(h, "/access/v1/evaluation", evaluation(TO_V1, f"{fillers}{i}"))
    _, asked = await ask(h, "/access/v1/evaluation", evaluation(TO_V1, request_id))
    approval_id: str = asked["context"]["approval_id"]
    _, a = await ask(h, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    return approval_id, a


async def keys(h: Harness) -> KeySet:
    async with h.http.get(f"{h.bot_url}/.well-known/jwks.json") as published:
        return KeySet(await published.json(content_type=None))


async def test_ten_parallel_evaluations_under_a_velocity_of_three_admit_exactly_three(hitl: Harness) -> None:
    answers = await asyncio.gather(*(ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"r{i}")) for i in range(10)))
    assert all(status == 200 for status, _ in answers), answers
    admitted = [a for _, a in answers if a["decision"] is True]
    held = [a for _, a in answers if a["decision"] is False]
    assert len(admitted) == 3 and len(held) == 7, answers
    published, now = await keys(hitl), hitl.clock.now()
    for a in admitted:
        assert a["context"]["basis"] == "policy"
        verify(a["context"]["receipt"], tool="transfer", args=TO_V1, keys=published, audience="bank", now=now)
    assert {a["context"]["reason"] for a in held} == {"approval_required"}
    assert len({a["context"]["approval_id"] for a in held}) == 7  # seven calls, one approval each
    # Reason codes only: no rule body, threshold or window reaches the gateway.
    assert all(set(a["context"]) == {"reason", "approval_id"} for a in held)
    assert "burst" not in str(held) and "max" not in str(held)


async def test_a_spoofed_subject_is_refused_and_nothing_is_counted(hitl: Harness) -> None:
    status, refused = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "s1", subject="agent:someone-else"))
    assert status == 403 and refused["error"]["code"] == "subject_not_allowed"
    status, refused = await ask(
        hitl, "/access/v1/evaluation", evaluation(TO_V1, "s2", subject="agent:carol"), GATEWAY_FOR_TWO
    )
    assert status == 403 and refused["error"]["code"] == "subject_not_allowed"
    # A batch with one spoofed item is refused whole, before any item is counted.
    batch = {"evaluations": [evaluation(TO_V1, "b1"), evaluation(TO_V1, "b2", subject="agent:mallory")]}
    status, refused = await ask(hitl, "/access/v1/evaluations", batch)
    assert status == 403
    # Each refusal is in the audit trail, naming the token that asked.
    status, audit = await ask(hitl, "/api/v1/audit", None, ADMIN, method="GET")
    spoofs = [e for e in audit["entries"] if e["outcome"] == "subject_not_allowed"]
    assert status == 200 and len(spoofs) == 3 and all("api:gateway" in e["detail"] for e in spoofs), spoofs
    # A token narrowed to some tools asks about no other.
    status, refused = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "s4", subject="agent:alice"), NARROW)
    assert status == 403 and refused["error"]["code"] == "tool_not_allowed"
    # A token without the evaluate scope may not ask at all.
    status, refused = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "s3"), AGENT)
    assert status == 403 and refused["error"]["code"] == "missing_scope"
    # The subjects a token names are its to ask for; nothing above was counted: three calls still run.
    for i, who in enumerate(["agent:alice", "agent:bob", "agent:alice"]):
        status, ok = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"ok{i}", subject=who), GATEWAY_FOR_TWO)
        assert status == 200 and ok["decision"] is True, ok
    status, fourth = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "ok3"))
    assert fourth["decision"] is False and fourth["context"]["reason"] == "approval_required"


async def test_approval_required_then_approved_admits_once_and_a_repeat_gets_the_same_answer(hitl: Harness) -> None:
    for i in range(3):
        assert (await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"r{i}")))[1]["decision"] is True
    status, held = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-held"))
    assert status == 200 and held["decision"] is False and held["context"]["reason"] == "approval_required"
    approval_id = held["context"]["approval_id"]
    # Asked again while it waits: the same approval, not another.
    for _ in range(2):
        status, again = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-held"))
        assert again == held
    status, a = await ask(hitl, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    assert status == 200 and a["requester"] == "agent:gw"
    decision = {"decision": "approve", "expected_version": a["version"], "action_hash": a["action_hash"]}
    status, _ = await ask(hitl, f"/api/v1/approvals/{approval_id}/decisions", decision, FIN1)
    assert status == 200

    status, admitted = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-held"))
    assert status == 200 and admitted["decision"] is True, admitted
    assert admitted["context"]["basis"] == "approval" and admitted["context"]["approval_id"] == approval_id
    claims = verify(
        admitted["context"]["receipt"],
        tool="transfer",
        args=TO_V1,
        keys=await keys(hitl),
        audience="bank",
        now=hitl.clock.now(),
    )
    assert claims["sub"] == approval_id and claims["approvers"] == ["U_FIN1"]
    # The repeat: the same answer, the same receipt; the approval was handed over once.
    for _ in range(2):
        status, repeat = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-held"))
        assert status == 200 and repeat == admitted
    status, a = await ask(hitl, f"/api/v1/approvals/{approval_id}", None, FIN1, method="GET")
    assert a["status"] == "executed"
    # The same arguments under another request_id are another call: a new approval, not this one's hand-over.
    status, other = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-other"))
    assert other["decision"] is False and other["context"]["approval_id"] != approval_id


async def test_a_rejected_call_says_rejected(hitl: Harness) -> None:
    approval_id, a = await held_call(hitl, "r-no", fillers="r")
    decision = {"decision": "reject", "expected_version": a["version"], "action_hash": a["action_hash"], "reason": "x"}
    assert (await ask(hitl, f"/api/v1/approvals/{approval_id}/decisions", decision, FIN1))[0] == 200
    status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-no"))
    assert status == 200 and no == {"decision": False, "context": {"reason": "rejected", "approval_id": approval_id}}
    # One nobody decides expires, and says so.
    _, late = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-late"))
    hitl.clock.advance(20 * 60)  # past the 10 minutes an approval waits, within the velocity window
    await hitl.rt.background.tick()
    status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-late"))
    expired = {"reason": "expired", "approval_id": late["context"]["approval_id"]}
    assert status == 200 and no == {"decision": False, "context": expired}, no


async def test_evaluations_of_one_request_id_at_once_after_approval_all_get_its_one_hand_over(hitl: Harness) -> None:
    approval_id, a = await held_call(hitl, "r-race", fillers="r")
    decision = {"decision": "approve", "expected_version": a["version"], "action_hash": a["action_hash"]}
    assert (await ask(hitl, f"/api/v1/approvals/{approval_id}/decisions", decision, FIN1))[0] == 200
    answers = await asyncio.gather(*(ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "r-race")) for _ in range(5)))
    assert [status for status, _ in answers] == [200] * 5
    assert len({str(a) for _, a in answers}) == 1 and answers[0][1]["decision"] is True, answers


async def test_a_denied_tool_and_a_halted_one_say_so_in_codes(hitl: Harness) -> None:
    status, no = await ask(hitl, "/access/v1/evaluation", evaluation({}, "w1", tool="wipe"))
    assert status == 200 and no == {"decision": False, "context": {"reason": "denied"}}
    halt = {"tool": "transfer", "reason": "incident 42"}
    assert (await ask(hitl, "/api/v1/halt", halt, ADMIN))[0] == 200
    status, no = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "h1"))
    assert status == 200 and no == {"decision": False, "context": {"reason": "halted"}}
    assert "incident" not in str(no)  # the halt's reason is for people, not for the gateway
    # An admin token evaluates too (admin includes evaluate), for its own identity.
    assert (await ask(hitl, "/api/v1/unhalt", {"tool": "transfer"}, ADMIN))[0] == 200
    status, yes = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "h2", subject="U_FIN2"), ADMIN)
    assert status == 200 and yes["decision"] is True, yes


async def test_the_same_request_id_counts_once_and_gets_the_same_receipt(hitl: Harness) -> None:
    first = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "same"))
    again = await asyncio.gather(*(ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "same")) for _ in range(4)))
    assert first[0] == 200 and first[1]["decision"] is True
    assert [a for _, a in again] == [first[1]] * 4
    decisions = [
        (await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"n{i}")))[1]["decision"] for i in range(3)
    ]
    assert decisions == [True, True, False]


async def test_a_batch_counts_each_item_as_one_call_with_defaults_from_its_top_level(hitl: Harness) -> None:
    batch = copy.deepcopy(SPEC_EVALUATIONS)
    batch["subject"]["id"] = "agent:gw"
    batch["action"] = {"name": "call"}
    batch["evaluations"] = [
        {"resource": {"type": "tool", "id": "transfer"}, "context": {"arguments": TO_V1, "request_id": f"b{i}"}}
        for i in range(5)
    ]
    status, answers = await ask(hitl, "/access/v1/evaluations", batch, headers={"X-Request-ID": "req-42"})
    assert status == 200, answers
    assert [a["decision"] for a in answers["evaluations"]] == [True, True, True, False, False]
    # deny_on_first_deny stops at the first deny: one more item asked, one answer.
    batch["options"] = {"evaluations_semantic": "deny_on_first_deny"}
    batch["evaluations"] = [
        {"resource": {"type": "tool", "id": "transfer"}, "context": {"arguments": TO_V1, "request_id": f"c{i}"}}
        for i in range(3)
    ]
    status, answers = await ask(hitl, "/access/v1/evaluations", batch)
    assert status == 200 and [a["decision"] for a in answers["evaluations"]] == [False]
    # Without items the top level is the one evaluation.
    status, single = await ask(hitl, "/access/v1/evaluations", evaluation({"to": "V-9", "amount": 1}, "solo"))
    assert status == 200 and single["decision"] is True


MALFORMED: list[tuple[str, Any]] = [
    ("no subject", {k: v for k, v in evaluation(TO_V1, "m1").items() if k != "subject"}),
    ("subject without id", {**evaluation(TO_V1, "m2"), "subject": {"type": "user"}}),
    ("subject id a number", {**evaluation(TO_V1, "m3"), "subject": {"type": "user", "id": 7}}),
    ("arguments not an object", {**evaluation(TO_V1, "m4"), "context": {"arguments": [1, 2]}}),
    ("an unknown top-level field", {**evaluation(TO_V1, "m5"), "obligations": []}),
    ("action naming another tool", {**evaluation(TO_V1, "m6"), "action": {"name": "refund"}}),
    ("a body that is not an object", [evaluation(TO_V1, "m7")]),
]


async def test_malformed_bodies_get_400_in_the_error_shape_and_change_nothing(hitl: Harness) -> None:
    for what, body in MALFORMED:
        status, refused = await ask(hitl, "/access/v1/evaluation", body)
        assert status == 400, (what, refused)
        assert set(refused) == {"error"} and refused["error"]["code"] and refused["error"]["message"], what
    headers = {"Authorization": f"Bearer {GATEWAY}", "Content-Type": "application/json"}
    async with hitl.http.post(f"{hitl.bot_url}/access/v1/evaluation", data=b"{not json", headers=headers) as r:
        assert r.status == 400 and (await refusal(r))["error"]["code"] == "malformed_json"
    too_many = {"subject": {"type": "user", "id": "agent:gw"}, "evaluations": [{}] * 65}
    status, refused = await ask(hitl, "/access/v1/evaluations", too_many)
    assert status == 400 and "error" in refused
    incomplete = {"evaluations": [evaluation(TO_V1, "i1"), {"resource": {"type": "tool", "id": "transfer"}}]}
    status, refused = await ask(hitl, "/access/v1/evaluations", incomplete)
    assert status == 400 and "evaluations[1]" in refused["error"]["message"]
    status, refused = await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, "x"), "not-a-token")
    assert status == 401 and refused["error"]["code"] == "unauthorized"
    # Nothing above was counted (the first item of the incomplete batch neither): three calls still run.
    decisions = [
        (await ask(hitl, "/access/v1/evaluation", evaluation(TO_V1, f"n{i}")))[1]["decision"] for i in range(4)
    ]
    assert decisions == [True, True, True, False]


async def test_the_metadata_document_names_the_endpoints(hitl: Harness) -> None:
    async with hitl.http.get(f"{hitl.bot_url}/.well-known/authzen-configuration") as r:
        assert r.status == 200
        found = await r.json()
    assert found == {
        "policy_decision_point": hitl.bot_url,
        "access_evaluation_endpoint": f"{hitl.bot_url}/access/v1/evaluation",
        "access_evaluations_endpoint": f"{hitl.bot_url}/access/v1/evaluations",
    }


WEB = """
web:
  public_url: https://hitl.example.com/
  oidc:
    issuer: https://id.example.com
    client_id: hitl
    client_secret_env: HITL_TEST_AUTHZEN_OIDC_SECRET
    slack_team_id: T0TEST
"""


async def test_with_the_web_inbox_an_approval_required_answer_links_its_decision_page(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    monkeypatch.setenv("HITL_TEST_AUTHZEN_OIDC_SECRET", "test-only")
    (tmp_path / "hitl.yaml").write_text(CONFIG + WEB)
    h = await start(SqliteStore(tmp_path / "web.db"), clock, config=tmp_path / "hitl.yaml")
    try:
        for i in range(3):
            await ask(h, "/access/v1/evaluation", evaluation(TO_V1, f"r{i}"))
        status, held = await ask(h, "/access/v1/evaluation", evaluation(TO_V1, "r-page"))
        approval_id = held["context"]["approval_id"]
        page = f"https://hitl.example.com/inbox/approvals/{approval_id}"
        assert status == 200 and held["context"] == {
            "reason": "approval_required",
            "approval_id": approval_id,
            "approval_url": page,
        }
        async with h.http.get(f"{h.bot_url}/.well-known/authzen-configuration") as r:
            found = await r.json()
        assert found["access_evaluation_endpoint"] == "https://hitl.example.com/access/v1/evaluation"
    finally:
        await stop(h)
