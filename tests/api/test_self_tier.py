"""Tier ``self`` on `hitl serve` (issue 68), on SQLite and Redis (its decision runs in a Lua script of its own): the
person an API token's ``acts_for`` names confirms the call, through the API and through a signed Slack click on the
card sent to them; anyone else is refused as "not yours" and audited; an agent-supplied "requester" changes nothing;
with nobody known the call is asked of the tool's role as ``approve``; a rule raises ``self`` to ``approve``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from hitl.api import token_hash
from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.storage import open_store
from hitl.receipts.signing import new_key_pem
from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import Api, Receiver
from tests.backends import fresh_store_url
from tests.bot.conftest import CONFIG, ROOT, start, stop, workspace
from tests.refund_config import write_refund_config

ALICE = "U_ALICE"
"""The person the assistant acts for: no reviewer role at all."""
TOKENS = {
    # name: (token, reviewer, scopes, acts_for)
    "assistant": ("tok-assistant", "agent:assistant", ["read", "propose", "run"], ALICE),
    "bare_agent": ("tok-bare-agent", "agent:bare", ["read", "propose"], None),
    # The assistant's identity again, on a token that names nobody: its calls fall back to approve.
    "assistant_unbound": ("tok-assistant-unbound", "agent:assistant", ["read", "propose"], None),
    "alice": ("tok-alice", ALICE, ["read", "decide"], None),
    "sup1": ("tok-support-1", "U_SUPPORT1", ["read", "decide"], None),
    # An AuthZEN gateway whose own agent acts for alice, and which speaks for another agent too.
    "gateway": ("tok-gateway-self", "agent:gw", ["evaluate"], ALICE),
}
SUBJECTS = {"gateway": ["agent:sam"]}
"""The requesters a token asks AuthZEN evaluations for besides its own identity."""
SEND = """    send_email: {tier: self, role: support}
    send_as_me:
      tier: self
      role: support
      timeout: 10m
      trustable: true
      schema:
        type: object
        properties: {to: {type: string}, subject: {type: string}}
        required: [to, subject]
"""
RULE = """    - name: outside_mail
      tools: [send_as_me]
      when: "args.to.endswith('@rival.example')"
      tier: approve
      reason: "mail to a rival goes past a reviewer"
"""
MAIL = {"to": "bob@example.com", "subject": "Lunch?"}


def self_config(tmp: Path) -> Path:
    """The refund example's hitl.yaml with ``send_as_me`` at tier self (raised to approve by a rule), receipts for
    it, and the tokens."""
    text = CONFIG.read_text().replace("  tools:\n", "  tools:\n" + SEND, 1).replace(", send_email]", "]", 1)
    text = text.replace("  rules:\n", "  rules:\n" + RULE, 1)
    (tmp / "receipt.pem").write_bytes(new_key_pem())
    receipts = ["receipts:", "  issuer: https://hitl.example.com", "  key_file: receipt.pem", "  tools:"]
    workflows = ["  workflows:", f"    refund: {ROOT / 'examples' / 'refund' / 'workflow.yaml'}"]
    lines = [*receipts, "    send_as_me: {}", "api:", *workflows, "  tokens:"]
    for name, (token, reviewer, scopes, acts_for) in TOKENS.items():
        extra = f", acts_for: '{acts_for}'" if acts_for else ""
        extra += f", subjects: {SUBJECTS[name]}" if name in SUBJECTS else ""
        spec = f"name: {name}, sha256: {token_hash(token)}, reviewer: '{reviewer}', scopes: {scopes}{extra}"
        lines.append(f"    - {{{spec}}}")
    return write_refund_config(tmp / "hitl.yaml", text + "\n".join(lines) + "\n")


class SelfApi(Api):
    store_url = ""
    """The store `hitl serve` uses, as ``HITL_STORE`` names it (for a CLI reading it)."""

    async def call(
        self, method: str, path: str, *, as_: str | None = "sup1", json: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {TOKENS[as_][0]}"} if as_ is not None else {}
        async with self.h.http.request(method, self.url + path, json=json, headers=headers, **kw) as resp:
            return resp.status, await resp.json(content_type=None)


@pytest.fixture(params=("sqlite", "redis"))
async def api(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[SelfApi]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    url = fresh_store_url(request.param, request, tmp_path, tag="self")
    state = workspace()
    state.users[ALICE] = {"name": "alice", "real_name": "Alice", "tz": "UTC"}
    h = await start(open_store(url), clock, state=state, config=self_config(tmp_path))
    made = SelfApi(h, tmp_path / "hitl.yaml", Receiver())
    made.store_url = url
    yield made
    await stop(h)


async def propose(api: SelfApi, args: dict[str, Any], *, as_: str = "assistant", key: str = "k1") -> Any:
    body = {"session": "s1", "tool": "send_as_me", "args": args, "idempotency_key": key, "agent": "assistant"}
    status, answer = await api.call("POST", "/proposals", as_=as_, json=body)
    assert status == 200, answer
    await api.h.settle()
    return answer


async def decide(api: SelfApi, a: dict[str, Any], as_: str, decision: str = "approve") -> tuple[int, Any]:
    body = {"decision": decision, "expected_version": a["version"], "action_hash": a["action_hash"]}
    return await api.call("POST", f"/approvals/{a['id']}/decisions", as_=as_, json=body)


async def audit_of(api: SelfApi, approval_id: str) -> list[dict[str, Any]]:
    status, shown = await api.call("GET", f"/approvals/{approval_id}", as_="alice")
    assert status == 200, shown
    return list(shown["audit"])


async def test_the_person_a_token_acts_for_confirms_and_no_one_else(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]
    assert (a["tier"], a["on_behalf_of"], a["requester"]) == ("self", ALICE, "agent:assistant")
    assert a["quorum"] == 1 and a["trustable"] is False and a["required_role"] is None

    status, body = await decide(api, a, "sup1")  # a reviewer of the tool's role: not theirs to confirm
    assert status == 403 and body["error"]["code"] == "not_eligible", body
    assert "not yours" in body["error"]["message"] and ALICE in body["error"]["message"]
    status, body = await decide(api, a, "alice", "trust")  # a self confirmation never grants a Trust
    assert status == 409 and body["error"]["code"] == "not_trustable", body

    status, done = await decide(api, a, "alice")
    assert status == 200 and done["status"] == "approved", done
    assert [(d["reviewer"], d["via"]) for d in done["decisions"]] == [(ALICE, "api:alice")]
    trail = await audit_of(api, a["id"])
    refused = [(e["actor"], e["outcome"]) for e in trail if e["event"] == "refused"]
    assert refused == [("U_SUPPORT1", "not_eligible"), (ALICE, "not_trustable")]
    decided = [e for e in trail if e["event"] == "decided"]
    assert len(decided) == 1 and decided[0]["actor"] == ALICE and "basis self" in decided[0]["detail"]


async def test_the_receipt_of_a_self_confirmed_call_says_basis_self(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]
    assert (await decide(api, a, "alice"))[0] == 200
    again = await propose(api, MAIL)
    assert again["verdict"] == "run"
    key = again["execution_key"]
    status, claim = await api.call(
        "POST", f"/executions/{key}/claim", as_="assistant", json={"action_hash": a["action_hash"]}
    )
    assert status == 200 and claim["acquired"], claim
    claims = jwt.decode(claim["receipt"], options={"verify_signature": False})
    assert (claims["basis"], claims["approvers"], claims["requester"]) == ("self", [ALICE], "agent:assistant")


async def test_an_agent_supplied_requester_is_ignored(api: SelfApi) -> None:
    # The model fills the arguments: a "requester" or "on_behalf_of" in them names nobody who may confirm.
    planted = {**MAIL, "requester": "U_SUPPORT1", "on_behalf_of": "U_SUPPORT1", "acts_for": "U_SUPPORT1"}
    a = (await propose(api, planted))["approval"]
    assert (a["tier"], a["on_behalf_of"]) == ("self", ALICE)
    status, body = await decide(api, a, "sup1")
    assert status == 403 and body["error"]["code"] == "not_eligible", body
    # A token with no acts_for: the planted names make nobody known, so the call is asked as approve.
    bare = (await propose(api, {**planted, "subject": "again"}, as_="bare_agent", key="k2"))["approval"]
    assert (bare["tier"], bare["on_behalf_of"], bare["required_role"]) == ("approve", None, "support")
    # No field of the proposal's body names a person or a tier either: one that tries is refused whole (an agent
    # cannot lower a call to self, nor name who confirms it).
    body_fields = {"session": "s1", "tool": "send_as_me", "args": MAIL, "idempotency_key": "k3"}
    for field, value in (
        ("requester", "U_SUPPORT1"),
        ("on_behalf_of", "U_SUPPORT1"),
        ("acts_for", ALICE),
        ("tier", "self"),
    ):
        status, body = await api.call("POST", "/proposals", as_="bare_agent", json={**body_fields, field: value})
        assert status == 422 and body["error"]["code"] == "invalid_input", body


async def test_with_nobody_known_the_call_is_asked_as_approve_of_its_role(api: SelfApi) -> None:
    a = (await propose(api, MAIL, as_="bare_agent"))["approval"]  # a token with no acts_for
    assert (a["tier"], a["required_role"], a["on_behalf_of"]) == ("approve", "support", None)
    assert a["rule"] == "self_without_person" and any("fail closed" in r for r in a["reasons"])
    assert (await decide(api, a, "alice"))[0] == 403  # nobody's own: the person is a stranger to it
    status, done = await decide(api, a, "sup1")
    assert status == 200 and done["status"] == "approved"
    decided = [e for e in await audit_of(api, a["id"]) if e["event"] == "decided"]
    assert "basis self" not in decided[0]["detail"]


async def test_a_trust_on_a_self_call_asked_as_approve_never_lets_a_later_call_skip_its_person(api: SelfApi) -> None:
    # The same agent identity and session, first with nobody known (asked as approve), then acting for alice.
    a = (await propose(api, MAIL, as_="assistant_unbound"))["approval"]
    assert (a["tier"], a["rule"], a["trustable"]) == ("approve", "self_without_person", False)
    status, body = await decide(api, a, "sup1", "trust")
    assert status == 409 and body["error"]["code"] == "not_trustable", body
    assert (await decide(api, a, "sup1"))[1]["status"] == "approved"
    later = await propose(api, MAIL, key="k2")
    assert later["approval"] is not None, later  # not let through by a Trust: alice still confirms it
    assert (later["approval"]["tier"], later["approval"]["on_behalf_of"]) == ("self", ALICE)


async def test_a_rule_raises_self_to_approve_and_the_person_is_then_no_reviewer_of_it(api: SelfApi) -> None:
    a = (await propose(api, {"to": "eve@rival.example", "subject": "Hi"}))["approval"]
    assert (a["tier"], a["rule"], a["required_role"], a["on_behalf_of"]) == (
        "approve",
        "outside_mail",
        "support",
        ALICE,
    )
    status, body = await decide(api, a, "alice")  # their own call, raised to a reviewer: not theirs to approve
    assert status == 403 and body["error"]["code"] == "self_approval", body
    status, done = await decide(api, a, "sup1")
    assert status == 200 and done["status"] == "approved"
    decided = [e for e in await audit_of(api, a["id"]) if e["event"] == "decided"]
    assert "basis self" not in decided[0]["detail"]


async def test_slack_card_goes_to_the_person_and_only_their_click_counts(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]
    card = api.h.card_for(a["id"])
    assert card.channel == "D" + ALICE[1:]  # the DM with the app: updatable, unlike an ephemeral message
    assert f"<@{ALICE}>" in json.dumps(card.blocks) and "Only you confirm" in json.dumps(card.blocks)

    await api.h.slack.click("U_SUPPORT1", card, ACTION_APPROVE)  # signed, from someone else
    await api.h.settle()
    told = api.h.ephemeral("U_SUPPORT1")
    assert told and "not yours" in told[-1].text, [m.text for m in told]
    status, shown = await api.call("GET", f"/approvals/{a['id']}", as_="alice")
    assert shown["status"] == "pending"
    assert [(e["actor"], e["outcome"]) for e in shown["audit"] if e["event"] == "refused"] == [
        ("U_SUPPORT1", "not_eligible")
    ]

    await api.h.slack.click(ALICE, api.h.card_for(a["id"]), ACTION_APPROVE)
    await api.h.settle()
    status, shown = await api.call("GET", f"/approvals/{a['id']}", as_="alice")
    assert shown["status"] == "approved" and shown["decisions"][0]["reviewer"] == ALICE
    assert shown["decisions"][0]["via"] == "slack"
    assert any("basis self" in e["detail"] for e in shown["audit"] if e["event"] == "decided")
    updated = api.h.card_for(a["id"])
    assert updated.edited and ACTION_APPROVE not in json.dumps(updated.blocks)  # the DM card shows the outcome


async def test_the_cli_under_production_decides_as_its_tokens_person(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]

    def as_token(name: str) -> dict[str, str]:  # production's way: the token says who acts, not --as
        return {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS[name][0], "HITL_STORE": "sqlite:///nowhere/x.db"}

    code, listed, err = await hitl("pending", "--json", env=as_token("alice"))
    assert code == 0 and [p["id"] for p in listed["pending"]] == [a["id"]], (listed, err)
    code, listed, err = await hitl("pending", "--json", env=as_token("sup1"))
    assert code == 0 and listed["pending"] == [], (listed, err)  # not a support reviewer's to decide
    code, body, err = await hitl("resume", a["id"], "--approve", "--json", env=as_token("sup1"))
    assert code == 1 and body["error"]["code"] == "not_eligible", (body, err)
    assert "not yours" in body["error"]["message"]
    code, body, err = await hitl("resume", a["id"], "--approve", "--json", env=as_token("alice"))
    assert code == 0, (body, err)
    assert body["approval"]["status"] == "approved"
    assert [(d["reviewer"], d["via"]) for d in body["approval"]["decisions"]] == [(ALICE, "api:alice")]
    trail = await audit_of(api, a["id"])
    assert [(e["actor"], e["outcome"]) for e in trail if e["event"] == "refused"] == [("U_SUPPORT1", "not_eligible")]


async def test_hitl_stats_counts_self_confirmations_apart(api: SelfApi) -> None:
    confirmed = (await propose(api, MAIL))["approval"]
    declined = (await propose(api, {**MAIL, "subject": "Dinner?"}, key="k2"))["approval"]
    reviewed = (await propose(api, MAIL, as_="bare_agent", key="k3"))["approval"]  # nobody known: approve
    assert (await decide(api, confirmed, "alice"))[0] == 200
    assert (await decide(api, declined, "alice", "reject"))[0] == 200
    assert (await decide(api, reviewed, "sup1"))[0] == 200
    await api.h.rt.store.tallies.flush()  # what `hitl serve` writes every few seconds, and when it stops

    env = {"HITL_STORE": api.store_url, "HITL_NOW": str(api.h.clock.now()), "HITL_API_URL": "", "HITL_TOKEN": ""}
    code, shown, err = await hitl("stats", "--since", "1d", "--json", env=env)
    assert code == 0, err
    assert shown["self"] == {"confirmed": 1, "declined": 1}
    rows = {(r["tool"], r["tier"]): r for r in shown["rows"]}
    assert (rows[("send_as_me", "self")]["approved"], rows[("send_as_me", "self")]["rejected"]) == (1, 1)
    assert (shown["all"]["approved"], shown["all"]["rejected"]) == (1, 0)  # only the reviewer's approval
    assert "self" not in [b["tier"] for b in shown["bands"]]
    code, text, err = await hitl("stats", "--since", "1d", env={**env, "COLUMNS": "120"})
    assert code == 0 and "self-confirmed 1" in " ".join(text.split()) and "declined 1" in text, (text, err)


async def test_a_run_started_by_a_token_asks_its_person_to_confirm_its_self_steps(api: SelfApi) -> None:
    status, run = await api.call(
        "POST", "/runs", as_="assistant", json={"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}}
    )
    assert status == 201 and run["approval"]["tool"] == "refund" and run["approval"]["on_behalf_of"] == ALICE
    assert (await decide(api, run["approval"], "sup1"))[0] == 200  # a refund is a reviewer's: tier approve
    assert await api.h.rt.lifecycle.process_jobs() == 1  # the run goes on, to the e-mail at tier self
    status, shown = await api.call("GET", f"/runs/{run['session_id']}", as_="alice")
    email = shown["approval"]
    assert (shown["status"], email["tool"], email["tier"], email["on_behalf_of"]) == (
        "paused",
        "send_email",
        "self",
        ALICE,
    )
    status, body = await decide(api, email, "sup1")
    assert status == 403 and "not yours" in body["error"]["message"]
    assert (await decide(api, email, "alice"))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1
    status, shown = await api.call("GET", f"/runs/{run['session_id']}", as_="alice")
    assert shown["status"] == "completed", shown


async def test_the_reminder_in_the_dm_calls_the_person_alone(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]
    card = api.h.card_for(a["id"])
    api.h.clock.advance(600 - 150)  # a quarter of its ten minutes left
    await api.h.rt.ctx.notifier.sweep()
    await api.h.settle()
    [reminder] = [m for m in api.h.state.messages if m.thread_ts == card.ts and m.channel == card.channel]
    assert reminder.text.startswith(f"<@{ALICE}>:") and "waits for your confirmation" in reminder.text
    assert "support" not in reminder.text and "U_SUPPORT" not in reminder.text


async def test_the_slash_command_confirms_for_the_person_alone(api: SelfApi) -> None:
    a = (await propose(api, MAIL))["approval"]
    await api.h.slack.command("U_SUPPORT1", "general", f"approve {a['id']}")
    await api.h.settle()
    assert "not yours" in api.h.ephemeral("U_SUPPORT1")[-1].text
    await api.h.slack.command(ALICE, "general", f"approve {a['id']}")
    await api.h.settle()
    assert "not yours" not in api.h.ephemeral(ALICE)[-1].text
    status, shown = await api.call("GET", f"/approvals/{a['id']}", as_="alice")
    assert shown["status"] == "approved" and [(d["reviewer"], d["via"]) for d in shown["decisions"]] == [
        (ALICE, "slack")
    ]


def _evaluation(subject: str, request_id: str) -> dict[str, Any]:
    """An AuthZEN evaluation of ``subject``'s call of send_as_me."""
    context = {"arguments": MAIL, "session": "s-gw", "request_id": request_id}
    return {
        "subject": {"type": "agent", "id": subject},
        "action": {"name": "call"},
        "resource": {"type": "tool", "id": "send_as_me"},
        "context": context,
    }


async def _evaluate(api: SelfApi, body: dict[str, Any]) -> Any:
    headers = {"Authorization": f"Bearer {TOKENS['gateway'][0]}"}
    async with api.h.http.post(f"{api.h.bot_url}/access/v1/evaluation", json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def test_an_authzen_gateway_s_self_call_is_confirmed_by_the_person_its_token_acts_for(api: SelfApi) -> None:
    first = await _evaluate(api, _evaluation("agent:gw", "r1"))
    assert first["decision"] is False and first["context"]["reason"] == "approval_required", first
    status, a = await api.call("GET", f"/approvals/{first['context']['approval_id']}", as_="alice")
    assert status == 200, a
    # Named exactly as the API's own proposal names it: the token's acts_for, nothing the gateway sent.
    assert (a["tier"], a["on_behalf_of"], a["requester"]) == ("self", ALICE, "agent:gw"), a
    status, body = await decide(api, a, "sup1")
    assert status == 403 and body["error"]["code"] == "not_eligible", body
    assert (await decide(api, a, "alice"))[0] == 200
    ran = await _evaluate(api, _evaluation("agent:gw", "r1"))
    assert ran["decision"] is True and ran["context"]["basis"] == "approval", ran
    claims = jwt.decode(ran["context"]["receipt"], options={"verify_signature": False})
    assert (claims["basis"], claims["approvers"], claims["requester"]) == ("self", [ALICE], "agent:gw")

    # Another subject the gateway speaks for: the token's person is not that agent's, and the gateway's word
    # names nobody, so the call is asked of the tool's role as approve (fail closed).
    other = await _evaluate(api, _evaluation("agent:sam", "r2"))
    assert other["decision"] is False and other["context"]["reason"] == "approval_required", other
    status, b = await api.call("GET", f"/approvals/{other['context']['approval_id']}", as_="alice")
    assert status == 200, b
    assert (b["tier"], b["on_behalf_of"], b["rule"]) == ("approve", None, "self_without_person"), b
    assert (await decide(api, b, "alice"))[0] == 403
