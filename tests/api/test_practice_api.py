"""Practice approvals over HTTP: only an admin token lists the twins waiting; to a reviewer's token one is an
approval like any other, and the answer to the decision that ends it tells that reviewer it was practice."""

from __future__ import annotations

from tests.api.conftest import Api


async def test_only_admins_list_practice_and_the_decider_is_told(practice_api: Api) -> None:
    api = practice_api
    args = {"order_id": "78291", "customer_id": "C-1", "amount": 120}
    body = {"session": "s1", "tool": "refund", "args": args, "idempotency_key": "k1"}
    status, proposal = await api.call("POST", "/proposals", as_="agent", json=body)
    assert status == 200
    real = proposal["approval"]["id"]

    status, body = await api.call("GET", "/practice", as_="sup1")
    assert status == 403
    status, listed = await api.call("GET", "/practice", as_="admin")
    assert status == 200
    [twin] = listed["items"]
    assert twin["args"]["customer_id"] == "C-0000" and twin["id"] != real
    assert twin["practice"] is None and "practice" not in str({k: v for k, v in twin.items() if k != "practice"})
    status, seen = await api.call("GET", f"/approvals/{twin['id']}", as_="sup1")
    assert status == 200 and seen["practice"] is None
    status, mine = await api.call("GET", f"/approvals/{real}", as_="sup1")
    assert status == 200 and seen["consequence"]["outcome"] == mine["consequence"]["outcome"]
    events = [e["event"] for e in seen["audit"]]  # its own consequence audited first, as a real one's
    assert events == [e["event"] for e in mine["audit"]] and events[:2] == ["consequence", "created"]

    bound = {"expected_version": twin["version"], "action_hash": twin["action_hash"]}
    status, done = await api.call(
        "POST", f"/approvals/{twin['id']}/decisions", as_="sup1", json={"decision": "reject", "reason": "no", **bound}
    )
    assert status == 200 and done["status"] == "rejected"
    assert done["practice"].startswith("That was a practice check") and "You caught it." in done["practice"]
    status, listed = await api.call("GET", "/practice", as_="admin")
    assert listed["items"] == []
