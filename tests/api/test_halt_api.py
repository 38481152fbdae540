"""The stop switch over HTTP: an admin token halts and unhalts, anyone who reads sees it, and while it stands the
API's own ways in (proposals, decisions, execution claims) answer 423 ``halted`` and change nothing."""

from __future__ import annotations

from tests.api.conftest import Api, refund_proposal

REFUND = {"order_id": "78291", "customer_id": "C-1", "amount": 120}


async def test_an_admin_halts_and_unhalts_and_the_api_refuses_meanwhile(api: Api) -> None:
    status, proposal = await api.call("POST", "/proposals", as_="agent", json=refund_proposal("s1", "k1", REFUND))
    assert status == 200
    pending = proposal["approval"]
    bound = {"expected_version": pending["version"], "action_hash": pending["action_hash"]}

    status, body = await api.call("POST", "/halt", as_="sup1", json={"tool": "refund", "reason": "no"})
    assert status == 403 and body["error"]["code"] == "missing_scope"  # deciding is not stopping the system
    status, body = await api.call("POST", "/halt", as_="admin", json={"tool": "refund", "reason": "incident 42"})
    assert status == 200 and (body["scope"], body["by"], body["reason"]) == ("refund", "U_SUPPORT2", "incident 42")
    status, body = await api.call("GET", "/halts", as_="reader")
    assert status == 200 and [h["scope"] for h in body["halts"]] == ["refund"]

    again = {"session": "s2", "tool": "refund", "args": REFUND, "idempotency_key": "k2"}
    status, body = await api.call("POST", "/proposals", as_="agent", json=again)
    assert status == 423 and body["error"]["code"] == "halted" and body["error"]["retryable"] is True
    assert "incident 42" in body["error"]["message"]
    status, body = await api.call(
        "POST", f"/approvals/{pending['id']}/decisions", as_="sup1", json={"decision": "approve", **bound}
    )
    assert status == 423 and body["error"]["code"] == "halted"
    status, shown = await api.call("GET", f"/approvals/{pending['id']}", as_="reader")
    assert shown["status"] == "pending" and shown["version"] == pending["version"]  # nothing changed
    status, body = await api.call(
        "POST",
        f"/approvals/{pending['id']}/decisions",
        as_="sup1",
        json={"decision": "reject", "reason": "stop", **bound},
    )
    assert status == 200 and body["status"] == "rejected"  # rejecting still works

    status, body = await api.call("POST", "/unhalt", as_="admin", json={"tool": "refund"})
    assert status == 200 and body["halt"]["scope"] == "refund" and body["resumed_runs"] == 0
    status, body = await api.call("POST", "/unhalt", as_="admin", json={"tool": "refund"})
    assert status == 404
    status, body = await api.call("POST", "/proposals", as_="agent", json=again)
    assert status == 200
    status, body = await api.call("POST", "/halt", as_="admin", json={"tool": "bad\nname"})
    assert status == 422
    status, trail = await api.call("GET", "/audit", as_="admin")
    events = [e["event"] for e in trail["entries"]]
    assert "halted" in events and "unhalted" in events
