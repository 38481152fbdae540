"""A run reaches no further than the token that drives it, through `hitl serve`'s HTTP API: another identity's
token cannot resume a run (its new values would ask the run's next steps in its requester's name), a token narrowed
by ``tools:`` starts or resumes no workflow that uses another tool, and every refusal is a 403 that changes nothing
and is audited."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api
from tests.api.test_api import decide

ORDER = {"workflow": "refund", "vars": {"order_id": "78291", "amount": 120}}


async def _refusals(api: Api) -> list[Any]:
    return [e for e in await api.h.rt.store.audit.entries() if e.event == "refused" and "/runs" in e.detail]


async def test_only_the_runs_requester_or_an_admin_resumes_it(api: Api) -> None:
    status, run = await api.call("POST", "/runs", as_="agent", json=ORDER)
    assert status == 201 and run["status"] == "paused", run
    session, before = run["session_id"], await api.h.rt.store.runs.load(run["session_id"])
    assert before is not None

    # Another agent's token, with the run scope: refused, and the run's variables are as they were.
    status, body = await api.call("POST", f"/runs/{session}/resume", as_="runner2", json={"vars": {"amount": 9000}})
    assert status == 403 and body["error"]["code"] == "not_eligible", body
    assert "agent:remote" not in body["error"]["message"]  # who started it is not this token's business
    after = await api.h.rt.store.runs.load(session)
    assert after is not None and after.data["vars"] == before.data["vars"] and after.version == before.version
    assert [e.actor for e in await _refusals(api)] == ["agent:other-runner"]

    # Its own requester's token resumes it; so does an admin's.
    status, body = await api.call("POST", f"/runs/{session}/resume", as_="agent", json={"vars": {"amount": 90}})
    assert status == 200 and body["status"] == "paused", body
    status, body = await api.call("POST", f"/runs/{session}/resume", as_="admin", json={})
    assert status == 200 and body["status"] == "paused", body
    assert (await decide(api, body["approval"]))[0] == 200
    assert await api.h.rt.lifecycle.process_jobs() == 1
    status, shown = await api.call("GET", f"/runs/{session}", as_="agent")
    assert status == 200 and shown["status"] == "completed", shown


async def test_a_token_narrowed_by_tools_drives_no_workflow_of_another_tool(api: Api) -> None:
    # The same identity as the run's requester, but its token may propose send_email alone: the refund workflow
    # proposes refunds, so it is neither started nor resumed with this token.
    status, body = await api.call("POST", "/runs", as_="emailrunner", json=ORDER)
    assert status == 403 and body["error"]["code"] == "tool_not_allowed", body
    assert "refund" in body["error"]["message"]
    assert await api.h.rt.store.runs.paused() == []  # nothing started

    status, run = await api.call("POST", "/runs", as_="agent", json=ORDER)
    assert status == 201, run
    session = run["session_id"]
    before = await api.h.rt.store.runs.load(session)
    status, body = await api.call("POST", f"/runs/{session}/resume", as_="emailrunner", json={"vars": {"amount": 9000}})
    assert status == 403 and body["error"]["code"] == "tool_not_allowed", body
    after = await api.h.rt.store.runs.load(session)
    assert after is not None and before is not None and after.data["vars"] == before.data["vars"]
    assert len(await _refusals(api)) == 2
