"""The HTTP API through real HTTP on `hitl serve`'s own web app, on SQLite and Redis: the whole loop, every refusal
(401, 403, 404, 409, 413, 415, 422, 429), revocation, runs, and a store left unchanged by bad requests."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from hitl.api.webhooks import MAX_ATTEMPTS, backoff, verify
from hitl.engine.config.api import EventKind
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.subscribers.events import EVENT_JOB
from hitl.engine.testing.conformance.helpers import cmd
from tests.api.conftest import WEBHOOK_SECRET, Api
from tests.store_dump import store_contents

REFUND = {"order_id": "78291", "customer_id": "C-1", "amount": 120, "reason": "damaged"}


async def propose(api: Api, *, key: str = "k1", args: dict[str, Any] | None = None, as_: str = "agent") -> Any:
    status, body = await api.call(
        "POST",
        "/proposals",
        as_=as_,
        json={
            "session": "s-remote",
            "tool": "refund",
            "args": args or REFUND,
            "idempotency_key": key,
            "evidence": "<!channel> customer says *urgent*",
            "agent": "remote-riley",
        },
    )
    assert status == 200, body
    await api.h.settle()  # the answer never waits on Slack: its card is posted by the bot's worker
    return body


async def decide(api: Api, approval: dict[str, Any], decision: str = "approve", as_: str = "sup1", **kw: Any) -> Any:
    body = {"decision": decision, "expected_version": approval["version"], "action_hash": approval["action_hash"], **kw}
    return await api.call("POST", f"/approvals/{approval['id']}/decisions", as_=as_, json=body)


async def test_the_whole_loop_through_http_only(api: Api) -> None:
    proposal = await propose(api)
    assert proposal["verdict"] == "pending" and proposal["execution_key"] == f"call:{proposal['approval']['id']}"
    approval = proposal["approval"]
    assert approval["asked_by"] == {"framework": "api", "agent": "remote-riley", "call_id": "k1"}
    assert approval["requester"] == "agent:remote"
    await api.h.settle()
    card = api.h.card_for(approval["id"])  # `hitl serve` on the same store posted the card
    assert "<!channel>" not in card.text

    status, listed = await api.call("GET", "/approvals?decidable=true", as_="sup1")
    assert status == 200 and [a["id"] for a in listed["items"]] == [approval["id"]]
    assert listed["items"][0]["can_decide"] is True
    status, listed = await api.call("GET", "/approvals?decidable=true", as_="fin1")
    assert status == 200 and listed["items"] == []  # finance is not the support role the refund needs

    status, decided = await decide(api, approval)
    assert status == 200, decided
    assert decided["status"] == "approved" and decided["version"] == approval["version"] + 1
    assert decided["decisions"][0]["via"] == "api:sup1" and decided["decisions"][0]["reviewer"] == "U_SUPPORT1"

    status, waited = await api.call("GET", f"/approvals/{approval['id']}/wait?after_version=1&timeout=5")
    assert status == 200 and waited["status"] == "approved"

    # The agent asks again with the same key: re-attached, now "run" with the approved arguments.
    again = await propose(api)
    assert again["verdict"] == "run" and again["args"] == REFUND
    key = again["execution_key"]
    digest = action_hash("refund", REFUND)
    status, claim = await api.call("POST", f"/executions/{key}/claim", as_="agent", json={"action_hash": digest})
    assert status == 200 and claim["acquired"] and claim["args"] == REFUND, claim
    status, second = await api.call("POST", f"/executions/{key}/claim", as_="agent", json={"action_hash": digest})
    assert status == 409, second  # one execution per approval
    status, done = await api.call("POST", f"/executions/{key}/outcome", as_="agent", json={"ok": True, "detail": "ok"})
    assert status == 200 and done["status"] == "executed", done
    status, third = await api.call("POST", f"/executions/{key}/claim", as_="agent", json={"action_hash": digest})
    assert status == 409 and third["error"]["code"] == "handed_elsewhere", third  # its one execution went to a caller
    assert approval["id"] in third["error"]["message"]

    status, shown = await api.call("GET", f"/approvals/{approval['id']}", as_="reader")
    assert status == 200 and shown["status"] == "executed" and shown["can_decide"] is False
    events = [e["event"] for e in shown["audit"]]
    # the refund's consequence is computed (and audited) before anyone is asked
    assert events[:2] == ["consequence", "created"] and "decided" in events
    decided_entry = next(e for e in shown["audit"] if e["event"] == "decided")
    assert decided_entry["actor"] == "U_SUPPORT1" and "api:sup1" in decided_entry["detail"]

    # `hitl serve`'s background delivers the webhooks, signed; the receiver verifies them as the docs show.
    await api.h.rt.webhooks.sweep()
    assert [e["type"] for e in api.hooks.events()] == ["approval.created", "approval.decided"]
    for headers, body in api.hooks.got:
        assert verify(WEBHOOK_SECRET, headers, body, now=api.h.clock.now())
        assert not verify("another-secret", headers, body, now=api.h.clock.now())
        assert not verify(WEBHOOK_SECRET, headers, body + b" ", now=api.h.clock.now())
        assert not verify(WEBHOOK_SECRET, headers, body, now=api.h.clock.now() + 3600)  # a replay, later
    created, decided_event = api.hooks.events()
    assert created["id"] == f"approval.created:{approval['id']}"
    assert decided_event["data"]["approval"]["status"] == "approved"
    assert decided_event["data"]["approval"]["decisions"][0]["via"] == "api:sup1"
    assert "customer says" not in json.dumps(decided_event)  # the evidence never: the view names it by digest
    assert "evidence" not in decided_event["data"]["approval"]


async def test_conflicts_are_409_with_the_current_version_and_status(api: Api) -> None:
    approval = (await propose(api))["approval"]
    status, body = await decide(api, {**approval, "version": approval["version"] + 5})
    assert status == 409 and body["error"]["code"] == "stale_version"
    assert body["error"]["version"] == approval["version"] and body["error"]["status"] == "pending"
    status, body = await decide(api, {**approval, "action_hash": "0" * 64})
    assert status == 409 and body["error"]["code"] == "hash_mismatch"
    assert (await decide(api, approval, "reject", reason="no"))[0] == 200
    status, body = await decide(api, approval, as_="sup2")
    assert status == 409 and body["error"]["status"] == "rejected"
    status, listed = await api.call("GET", "/approvals?status=rejected")
    assert status == 200 and [a["id"] for a in listed["items"]] == [approval["id"]]
    assert listed["items"][0]["can_decide"] is False
    status, listed = await api.call("GET", "/approvals?status=any&tool=refund&limit=1")
    assert status == 200 and len(listed["items"]) == 1 and listed["cursor"] is None

    late = (await propose(api, key="k2", args={**REFUND, "order_id": "2"}))["approval"]
    api.h.clock.advance(5 * 3600)  # past the refund's 4h timeout
    status, body = await decide(api, late)
    assert status == 409 and body["error"]["code"] == "expired", body


async def test_who_may_decide_is_enforced_and_audited(api: Api) -> None:
    approval = (await propose(api))["approval"]
    status, body = await decide(api, approval, as_="reader")
    assert status == 403 and body["error"]["code"] == "missing_scope"
    status, body = await decide(api, approval, as_="fin1")
    assert status == 403 and body["error"]["code"] == "not_eligible"
    mine = (await propose(api, key="k3", args={**REFUND, "order_id": "3"}, as_="admin"))["approval"]
    status, body = await decide(api, mine, as_="admin")
    assert status == 403 and body["error"]["code"] == "self_approval"  # the admin token proposed it
    status, body = await api.call("GET", f"/approvals/{approval['id']}", as_="emails")
    assert status == 404  # a token scoped to send_email does not see refunds at all
    status, shown = await api.call("GET", f"/approvals/{approval['id']}")
    refusals = [e for e in shown["audit"] if e["event"] == "refused"]
    assert [e["outcome"] for e in refusals] == ["not_eligible"] and refusals[0]["actor"] == "U_FIN1"


async def test_modify_is_validated_against_the_schema_field_by_field(api: Api) -> None:
    approval = (await propose(api))["approval"]
    status, body = await decide(api, approval, "modify", args={**REFUND, "amount": "lots", "extra": 1})
    assert status == 422 and body["error"]["code"] == "invalid_input"
    assert {f["field"] for f in body["error"]["fields"]} >= {"amount"}
    status, body = await decide(api, approval, "modify", args={**REFUND, "amount": 80})
    assert status == 200 and body["execute_args"]["amount"] == 80
    assert body["execute_hash"] == action_hash("refund", {**REFUND, "amount": 80}) != body["action_hash"]
    key = f"call:{approval['id']}"
    status, refused = await api.call(
        "POST", f"/executions/{key}/claim", as_="agent", json={"action_hash": approval["action_hash"]}
    )
    assert status == 409 and refused["error"]["code"] == "hash_mismatch"  # the proposal as it was is not what runs
    status, claim = await api.call(
        "POST", f"/executions/{key}/claim", as_="agent", json={"action_hash": body["execute_hash"]}
    )
    assert status == 200 and claim["args"]["amount"] == 80


async def test_malformed_and_unauthenticated_requests_change_nothing(api: Api) -> None:
    approval = (await propose(api))["approval"]
    url = f"/approvals/{approval['id']}/decisions"
    good = {"decision": "approve", "expected_version": approval["version"], "action_hash": approval["action_hash"]}
    store = api.h.rt.store
    audited = len(await store.audit.entries(limit=1000))
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic dG9rLXN1cHBvcnQtMQ=="}):
        status, body = await api.call("POST", url, as_=None, json=good, headers=headers)
        assert (status, body["error"]["code"]) == (401, "unauthorized")
    # Each is an audit entry, and nothing else: the approval is as it was.
    new = (await store.audit.entries(limit=1000))[audited:]
    assert [(e.actor, e.event, e.outcome) for e in new] == [("unauthenticated", "refused", "unauthorized")] * 3
    assert (await store.approvals.get(approval["id"])).version == approval["version"]
    before = await snapshot(api)
    cases: list[tuple[int, dict[str, Any]]] = [
        (422, {"json": {**good, "surprise": 1}}),
        (422, {"json": {**good, "expected_version": "1"}}),
        (422, {"json": {**good, "decision": "maybe"}}),
        (422, {"json": {**good, "action_hash": "abc"}}),
        (422, {"json": [good]}),
        (400, {"data": b"{not json", "headers": {"Content-Type": "application/json"}}),
        (415, {"data": b"decision=approve", "headers": {"Content-Type": "application/x-www-form-urlencoded"}}),
        (413, {"data": b"{" + b" " * 70000 + b"}", "headers": {"Content-Type": "application/json"}}),
        (411, {"data": chunked(), "headers": {"Content-Type": "application/json"}}),
    ]
    for expected, kw in cases:
        status, body = await api.call("POST", url, **kw)
        assert status == expected, (kw, body)
        assert body["error"]["code"] and body["error"]["message"], body
    for path, expected in [
        ("/approvals/nope", 404),
        ("/approvals?limit=0", 422),
        ("/approvals?limit=1&limit=2", 422),
        ("/approvals?status=approvedish", 422),
        (f"/approvals/{approval['id']}/wait?after_version=x", 422),
        (f"/approvals/{approval['id']}/wait?after_version=1&timeout=600", 422),
        ("/nowhere", 404),
        ("/runs/nope", 404),
    ]:
        status, body = await api.call("GET", path)
        assert status == expected, (path, body)
    status, body = await api.call("POST", "/executions/call:nope/claim", as_="agent", json={"action_hash": "0" * 64})
    assert status == 404
    status, body = await api.call("POST", "/runs", as_="agent", json={"workflow": "../../etc/passwd"})
    assert status == 404 and "registered: refund" in body["error"]["message"]
    assert await snapshot(api) == before


async def test_a_removed_token_is_refused_on_the_next_request_and_rates_are_limited(api: Api) -> None:
    assert (await api.call("GET", "/approvals", as_="sup1"))[0] == 200
    text = api.config.read_text().replace("sha256:", "sha256: ", 1)  # same content, new stamp
    lines = [ln for ln in text.splitlines() if "name: sup1," not in ln]
    api.config.write_text("\n".join(lines) + "\n  rate: 0.01\n  burst: 2\n")
    status, body = await api.call("GET", "/approvals", as_="sup1")
    assert status == 401, body
    assert (await api.call("GET", "/approvals", as_="sup2"))[0] == 200
    assert (await api.call("GET", "/approvals", as_="sup2"))[0] == 200
    status, body = await api.call("GET", "/approvals", as_="sup2")
    assert status == 429 and body["error"]["retryable"] is True
    assert int(api.last_headers["Retry-After"]) >= 1
    assert (await api.call("GET", "/approvals", as_="fin1"))[0] == 200  # another token has its own budget
    api.config.write_text("api: {tokens: [{name: x, sha256: nothex, reviewer: a, scopes: [read]}]}\n")
    status, body = await api.call("GET", "/approvals", as_="fin1")
    assert status == 503 and body["error"]["code"] == "policy_invalid"  # a broken config honours no token


async def test_runs_start_by_name_pause_and_resume_with_new_variables(api: Api) -> None:
    status, run = await api.call(
        "POST", "/runs", as_="agent", json={"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}}
    )
    assert status == 201 and run["status"] == "paused", run
    approval = run["approval"]
    assert approval["tool"] == "refund" and approval["args"]["amount"] == 120
    status, shown = await api.call("GET", f"/runs/{run['session_id']}", as_="reader")
    assert status == 200 and shown["status"] == "paused" and shown["approval"]["id"] == approval["id"]

    status, body = await api.call("POST", f"/runs/{run['session_id']}/resume", as_="agent", json={"vars": {"x": 1}})
    assert status == 422, body  # unknown variable
    status, body = await api.call(
        "POST", f"/runs/{run['session_id']}/resume", as_="agent", json={"vars": {"amount": 90}}
    )
    assert status == 200 and body["status"] == "paused", body
    # New values are for the steps still to come: the waiting approval stays bound to exactly what it shows.
    assert body["approval"]["id"] == approval["id"] and body["approval"]["args"]["amount"] == 120
    found = await api.h.rt.store.runs.load(run["session_id"])
    assert found is not None and found.data["vars"]["amount"] == 90
    assert any("variables changed by api:agent: amount" in line for line in found.data["history"])
    assert (await decide(api, body["approval"]))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1  # `hitl serve`'s background loop resumes it
    status, shown = await api.call("GET", f"/runs/{run['session_id']}")
    assert status == 200 and shown["status"] == "completed", shown


async def snapshot(api: Api) -> Any:
    """Everything the store holds: every table's rows (SQLite, PostgreSQL), every key's serialized value (Redis)."""
    return await store_contents(api.h.rt.store)


async def test_webhooks_are_retried_with_backoff_and_given_up_in_the_audit(api: Api) -> None:
    approval = (await propose(api))["approval"]
    api.hooks.fail = 2
    await api.h.rt.webhooks.sweep()  # attempt 1: 500
    await api.h.rt.webhooks.sweep()  # not due yet: nothing sent
    assert len(api.hooks.got) == 1
    api.h.clock.advance(backoff(1))
    await api.h.rt.webhooks.sweep()  # attempt 2: 500
    api.h.clock.advance(backoff(2))
    await api.h.rt.webhooks.sweep()  # attempt 3: delivered
    await api.h.rt.webhooks.sweep()
    ids = [h["X-Hitl-Event-Id"] for h, _ in api.hooks.got]
    assert ids == [f"approval.created:{approval['id']}"] * 3  # the same id every time: receivers deduplicate

    api.hooks.fail = 10**6  # a subscriber that never answers well
    assert (await decide(api, approval, "reject", reason="no"))[0] == 200
    for attempt in range(1, MAX_ATTEMPTS + 1):
        await api.h.rt.webhooks.sweep()
        api.h.clock.advance(backoff(attempt))
    await api.h.rt.webhooks.sweep()
    assert len(api.hooks.got) == 3 + MAX_ATTEMPTS
    trail = await api.h.rt.store.audit.entries(limit=1000)
    gave_up = [e for e in trail if e.event == "webhook_failed"]
    assert len(gave_up) == 1 and "approval.decided" in gave_up[0].detail


async def test_run_finished_and_expiry_reach_the_subscriber(api: Api) -> None:
    status, run = await api.call(
        "POST", "/runs", as_="agent", json={"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}}
    )
    assert status == 201
    assert (await decide(api, run["approval"]))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1
    late = (await propose(api, key="late"))["approval"]
    api.h.clock.advance(5 * 3600)
    await api.h.rt.background.tick()  # expiry, then deliveries
    await api.h.rt.webhooks.sweep()
    events = {(e["type"], e["id"]) for e in api.hooks.events()}
    assert ("run.finished", f"run.finished:{run['session_id']}") in events
    assert ("approval.expired", f"approval.expired:{late['id']}") in events
    finished = next(e for e in api.hooks.events() if e["type"] == "run.finished")
    assert finished["data"]["run"]["status"] == "completed"


async def chunked() -> Any:
    yield b'{"decision": '
    yield b'"approve"}'


async def test_a_token_narrowed_to_roles_decides_only_with_those(api: Api) -> None:
    # U_SUPPORT1 holds support; a token of theirs narrowed to finance cannot use it.
    text = api.config.read_text().replace("name: sup2,", "name: sup2, roles: [finance],", 1)
    api.config.write_text(text)
    approval = (await propose(api))["approval"]
    status, body = await decide(api, approval, as_="sup2")
    assert status == 403 and body["error"]["code"] == "not_eligible", body
    status, body = await decide(api, approval, as_="sup1")
    assert status == 200


async def test_hundreds_of_simultaneous_decisions_record_exactly_one(api: Api) -> None:
    api.config.write_text(api.config.read_text().replace("api:\n", "api:\n  rate: 10000\n  burst: 100000\n", 1))
    approval = (await propose(api))["approval"]
    calls = [
        decide(api, approval, "approve" if i % 2 else "reject", as_=("sup1", "sup2")[i % 2], reason="r")
        for i in range(200)
    ]
    answers = await asyncio.gather(*calls)
    assert sorted({status for status, _ in answers}) == [200, 409]
    assert sum(1 for status, _ in answers if status == 200) == 1
    status, shown = await api.call("GET", f"/approvals/{approval['id']}")
    assert len(shown["decisions"]) == 1 and shown["version"] == approval["version"] + 1


async def test_an_event_a_dead_process_never_queued_is_caught_up_once(api: Api) -> None:
    # An agent process creates the approval and dies before queueing its event: its service had no outbox yet.
    svc = api.h.service
    silent = dataclasses.replace(svc, events=None)
    proposal = await silent.propose(ProposeRequest("refund", REFUND, session_id="s-dead", requester="agent:dead"))
    assert proposal.approval is not None
    await api.h.rt.webhooks.sweep()  # the sweep queues it (and delivers)
    await api.h.rt.webhooks.sweep()  # and does not queue it again
    assert [e["id"] for e in api.hooks.events()] == [f"approval.created:{proposal.approval.id}"]
    await svc.events.emit(  # the original emitter coming back late changes nothing either
        EventKind.APPROVAL_CREATED, f"approval.created:{proposal.approval.id}", {}
    )
    await api.h.rt.webhooks.sweep()
    assert len(api.hooks.got) == 1


async def test_a_run_waiting_on_two_steps_shows_both_until_each_is_decided(api: Api, tmp_path: Path) -> None:
    flow = tmp_path / "both.yaml"
    flow.write_text(
        "name: both-reviews\n"
        "pattern:\n"
        "  type: parallel\n"
        "  branches:\n"
        "    - {id: legal, steps: [{id: legal_review, type: gate, prompt: Legal review}]}\n"
        "    - {id: brand, steps: [{id: brand_review, type: gate, prompt: Brand review}]}\n"
    )
    api.config.write_text(api.config.read_text().replace("  workflows:\n", f"  workflows:\n    both: {flow}\n", 1))
    status, run = await api.call("POST", "/runs", as_="agent", json={"workflow": "both"})
    assert status == 201 and run["status"] == "paused", run
    assert sorted(a["tool"] for a in run["waiting"]) == ["gate:brand_review", "gate:legal_review"]
    assert run["approval"]["id"] == run["waiting"][0]["id"]
    status, shown = await api.call("GET", f"/runs/{run['session_id']}", as_="reader")
    assert status == 200 and [a["id"] for a in shown["waiting"]] == [a["id"] for a in run["waiting"]]

    first, second = shown["waiting"]
    assert (await decide(api, first))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1
    status, shown = await api.call("GET", f"/runs/{run['session_id']}")
    assert shown["status"] == "paused" and [a["id"] for a in shown["waiting"]] == [second["id"]], shown
    assert shown["approval"]["id"] == second["id"]
    assert (await decide(api, second))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1
    status, shown = await api.call("GET", f"/runs/{run['session_id']}")
    assert shown["status"] == "completed" and shown["waiting"] == [] and shown["approval"] is None, shown


async def test_a_proposal_that_breaks_the_tools_schema_is_refused_before_any_approval_exists(api: Api) -> None:
    """hitl.yaml declares refund's schema (numeric amount, customer_id required): the proposal gets 422 naming each
    field, no approval or window count is written, and the refusal is audited."""

    async def proposed(args: dict[str, Any], key: str, **extra: Any) -> tuple[int, Any]:
        body = {"session": "s-bad", "tool": "refund", "args": args, "idempotency_key": key, **extra}
        return await api.call("POST", "/proposals", as_="agent", json=body)

    status, body = await proposed({"order_id": "1", "amount": "lots"}, "b")
    assert status == 422, body
    assert body["error"]["code"] == "invalid_input"
    assert {f["field"] for f in body["error"]["fields"]} == {"amount", "customer_id"}, body
    assert "hitl.yaml" in body["error"]["message"]
    store = api.h.rt.store
    assert (await store.approvals.list_pending()).items == []
    refused = [e for e in await store.audit.entries() if e.event == "refused" and "s-bad" in e.detail]
    # The actor is the token's identity.
    assert [(e.outcome, e.actor) for e in refused] == [("invalid_input", "agent:remote")], refused
    # A schema sent with the call is checked too, on top of the declared one.
    sent = {"type": "object", "properties": {"reason": {"type": "string", "minLength": 5}}}
    status, body = await proposed({**REFUND, "reason": "x"}, "c", args_schema=sent)
    assert status == 422 and [f["field"] for f in body["error"]["fields"]] == ["reason"], body
    assert "the call" in body["error"]["message"]
    assert (await store.approvals.list_pending()).items == []


async def test_modify_is_a_merge_patch_and_the_answer_says_what_changed(api: Api) -> None:
    approval = (await propose(api))["approval"]
    status, body = await decide(api, approval, "modify", args={"amount": 80})  # only what changes
    assert status == 200, body
    assert body["execute_args"] == {**REFUND, "amount": 80}  # the reason "damaged" is kept, not reset
    assert body["changes"] == {"amount": {"before": 120, "after": 80}}
    status, shown = await api.call("GET", f"/approvals/{approval['id']}", as_="sup1")
    decided = [e for e in shown["audit"] if e["event"] == "decided"]
    assert decided and decided[-1]["detail"].endswith("amount: 120 -> 80")  # the audit entry says it too

    other = (await propose(api, key="k-replace", args={**REFUND, "order_id": "9"}))["approval"]
    status, body = await decide(api, other, "modify", args={"amount": 50}, replace_args=True)
    assert status == 422 and body["error"]["code"] == "invalid_input"  # a whole replacement needs every field


async def test_a_decisions_events_are_written_with_it_and_outlive_a_process_that_died(api: Api) -> None:
    """A decision writes its event job in its own atomic step, beside the card update: the process that decided
    may die before it queues the events, and `hitl serve` still delivers them, once."""
    store = api.h.rt.store
    approval = (await propose(api))["approval"]
    status, decided = await decide(api, approval)
    assert status == 200
    [job] = await store.jobs.claim("peek", kind=EVENT_JOB, limit=10, now=api.h.clock.now(), lease=0.001)
    assert job.payload == {"approval_id": approval["id"]}
    # As a process that died right after the store's atomic step leaves it: the decision and its jobs, no events.
    other = (await propose(api, key="k2", args={**REFUND, "amount": 13}))["approval"]
    stored = await store.approvals.get(other["id"])
    await store.approvals.decide(cmd(stored, "U_SUPPORT1", jobs=(EVENT_JOB,)), now=api.h.clock.now())
    api.h.clock.advance(1)
    await api.h.rt.webhooks.sweep()
    await api.h.rt.webhooks.sweep()
    ids = [e["id"] for e in api.hooks.events()]
    for a, version in ((approval, decided["version"]), (other, stored.version + 1)):
        assert ids.count(f"approval.decided:{a['id']}:v{version}") == 1, ids
