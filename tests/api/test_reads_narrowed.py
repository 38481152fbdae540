"""Reading approvals through `hitl serve` with a token narrowed by `roles:`, and `hitl show ID` / `hitl audit ID`
(real processes) through it: an approval outside the token's roles (by the rule it decides and withdraws by) is 404
like one that does not exist, and no listing (nor a group decision's answer) shows it; one within them, or asked by
the token's own identity, reads as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hitl.api import token_hash
from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import Api, pending_refund, shop_api

ADMIN_SUPPORT, DECIDE_FINANCE, AGENT_FINANCE = "tok-read-admin-support", "tok-read-finance", "tok-read-agent"
NARROWED = "".join(
    f"    - {{name: {name}, sha256: {token_hash(token)}, reviewer: '{who}', scopes: {scopes}, roles: [{role}]}}\n"
    for name, token, who, scopes, role in (
        ("admin-support", ADMIN_SUPPORT, "ops:admin-support", "[admin]", "support"),
        ("fin1-finance", DECIDE_FINANCE, "U_FIN1", "[read, decide]", "finance"),
        ("agent-finance", AGENT_FINANCE, "agent:remote", "[read, propose]", "finance"),
    )
)
"""An admin token narrowed to support, a reviewer's narrowed to finance, and an agent's narrowed to finance (more
entries of the ``api.tokens`` list the configuration ends with)."""


async def _get(api: Api, token: str, path: str) -> tuple[int, Any]:
    return await api.call("GET", path, as_=None, headers={"Authorization": f"Bearer {token}"})


async def _listed(api: Api, token: str, query: str) -> list[str]:
    status, body = await _get(api, token, f"/approvals?{query}")
    assert status == 200, body
    return [a["id"] for a in body["items"]]


async def test_a_role_narrowed_token_reads_only_the_approvals_within_its_roles(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch, extra=NARROWED) as api:
        small, large = await pending_refund(api, "k-small", 20), await pending_refund(api, "k-large", 900)
        for token, mine, other in ((ADMIN_SUPPORT, small, large), (DECIDE_FINANCE, large, small)):
            status, read = await _get(api, token, f"/approvals/{mine}")
            assert status == 200 and read["id"] == mine and read["audit"], read
            for path in (f"/approvals/{other}", f"/approvals/{other}/wait?after_version=0&timeout=0"):
                status, refused = await _get(api, token, path)
                assert status == 404 and refused["error"]["code"] == "not_found", (path, refused)
            status, refused = await _get(api, token, "/approvals/apr_NOSUCH00")  # the same answer as one not there
            assert status == 404 and refused["error"]["code"] == "not_found"
            assert await _listed(api, token, "status=any") == [mine]
            assert await _listed(api, token, "order=age") == [mine]
        status, read = await _get(api, "tok-admin", f"/approvals/{large}")  # narrowed to nothing: every approval
        assert status == 200 and read["id"] == large
        # A group decision answers each member's view: one outside the token's roles is refused as not found, unshown.
        status, small_read = await _get(api, "tok-admin", f"/approvals/{small}")
        member = {"id": small, "expected_version": small_read["version"], "action_hash": small_read["action_hash"]}
        headers = {"Authorization": f"Bearer {DECIDE_FINANCE}"}
        body = {"approvals": [member], "decision": "reject", "reason": "not mine"}
        status, out = await api.call("POST", "/decisions", as_=None, headers=headers, json=body)
        assert status == 200 and [(m["outcome"], m["code"], m["approval"]) for m in out["members"]] == [
            ("refused", "not_found", None)
        ], out
        assert sorted(await _listed(api, "tok-admin", "order=age")) == sorted([small, large])
        # The agent's identity asked both: narrowing its token to finance hides neither of its own requests.
        assert sorted(await _listed(api, AGENT_FINANCE, "order=age")) == sorted([small, large])
        status, read = await _get(api, AGENT_FINANCE, f"/approvals/{small}")
        assert status == 200 and read["id"] == small

        env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": ADMIN_SUPPORT, "HITL_STORE": "sqlite:///nonexistent/x.db"}
        code, shown, err = await hitl("show", small, "--json", env=env)
        assert code == 0 and shown["id"] == small, (shown, err)
        code, shown, err = await hitl("show", large, "--json", env=env)
        assert code == 1 and shown["error"]["code"] == "not_found", (shown, err)  # as for an id that is not there
        code, trail, err = await hitl("audit", small, "--json", env=env)
        assert code == 0 and {e["approval_id"] for e in trail["audit"]} == {small}, (trail, err)
        code, trail, err = await hitl("audit", large, "--json", env=env)
        assert code == 1 and trail["error"]["code"] == "not_found", (trail, err)


async def test_a_run_shows_a_role_narrowed_token_only_the_approvals_it_waits_on_within_the_tokens_roles(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch, extra=NARROWED) as api:
        started = {"workflow": "refund", "vars": {"order_id": "78291", "amount": 900}}  # finance decides it
        status, run = await api.call("POST", "/runs", as_="agent", json=started)
        assert status == 201 and run["status"] == "paused", run
        asked = run["approval"]["id"]
        status, shown = await _get(api, DECIDE_FINANCE, f"/runs/{run['session_id']}")
        assert status == 200 and shown["approval"]["id"] == asked and [a["id"] for a in shown["waiting"]] == [asked]
        status, shown = await _get(api, ADMIN_SUPPORT, f"/runs/{run['session_id']}")
        assert status == 200 and shown["status"] == "paused" and shown["approval"] is None and shown["waiting"] == []
