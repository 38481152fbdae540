"""What the CLI's remote mode needs over HTTP, each with its scope: the trust grants in force (``GET /trust``, only
those of tools the token may decide), ending them (``DELETE /trust``, ``decide`` and the right to decide the tool),
and the figures per reviewer (``GET /reviewers``, ``admin``). Every refusal is an audit entry, a request without a
valid token too (an entry each up to a rate per address; past it, counted into the next entry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.api import token_hash
from hitl.api.limits import RateLimiter
from hitl.api.unauthenticated import Unauthenticated
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import Api, shop_api, sqlite_api, trusted_refund


async def _refusals(api: Api) -> list[tuple[str, str]]:
    entries = await api.h.rt.runtime.store.audit.entries(limit=500)
    return [(e.actor, e.outcome) for e in entries if e.event == "refused"]


async def test_trust_grants_over_the_api_each_with_its_scope(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch) as api:
        await trusted_refund(api)
        for who, seen in (("sup1", 1), ("admin", 1), ("emails", 0), ("agent", 0)):
            status, listed = await api.call("GET", "/trust", as_=who)
            assert status == 200 and len(listed["grants"]) == seen, who
        [grant] = (await api.call("GET", "/trust", as_="sup1"))[1]["grants"]
        assert (grant["requester"], grant["session_id"], grant["tool"]) == ("agent:remote", "s1", "refund")

        query = "/trust?session=s1&tool=refund"
        status, problem = await api.call("DELETE", query, as_="reader")
        assert status == 403 and problem["error"]["code"] == "missing_scope"
        status, problem = await api.call("DELETE", query, as_="emails")  # may decide, but not refunds
        assert status == 403 and problem["error"]["code"] == "not_eligible"
        assert await _refusals(api) == [("U_SUPPORT2", "missing_scope"), ("U_SUPPORT1", "not_eligible")]
        status, done = await api.call("DELETE", query, as_="sup2")
        assert status == 200 and done == {"revoked": 1}
        status, problem = await api.call("DELETE", query, as_="sup2")
        assert status == 404
        assert (await api.call("GET", "/trust", as_="admin"))[1]["grants"] == []


ADMIN_MAIL, ADMIN_SUPPORT = "tok-admin-mail", "tok-admin-support"
NARROWED_ADMINS = "".join(
    f"    - {{name: {name}, sha256: {token_hash(token)}, reviewer: U_SUPPORT2, scopes: [admin], roles: [{role}]}}\n"
    for name, token, role in (("admin-mail", ADMIN_MAIL, "mail"), ("admin-support", ADMIN_SUPPORT, "support"))
)
"""Two admin tokens narrowed to one role each (more entries of the ``api.tokens`` list the configuration ends with)."""


async def test_an_admin_token_narrowed_to_roles_reaches_only_their_tools_trust(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # refund is decided by support (or finance, for a large one): an admin token narrowed to mail neither lists nor
    # ends its trust, over the API or from the CLI through it (403 not_eligible, audited, the grant still in force).
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    mail_role = lambda text: text.replace("roles:\n", "roles:\n  mail: [U_SUPPORT2]\n", 1)  # noqa: E731
    async with sqlite_api(tmp_path, clock, extra=NARROWED_ADMINS, edit=mail_role) as api:
        await trusted_refund(api)
        mail, support = ({"Authorization": f"Bearer {t}"} for t in (ADMIN_MAIL, ADMIN_SUPPORT))
        status, listed = await api.call("GET", "/trust", as_=None, headers=mail)
        assert status == 200 and listed["grants"] == [], listed
        query = "/trust?session=s1&tool=refund"
        status, problem = await api.call("DELETE", query, as_=None, headers=mail)
        assert status == 403 and problem["error"]["code"] == "not_eligible", problem
        env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": ADMIN_MAIL, "HITL_STORE": "sqlite:///nonexistent/x.db"}
        code, body, err = await hitl("trust", "revoke", "refund", "--session", "s1", "--json", env=env)
        assert code != 0 and body["error"]["code"] == "not_eligible", (body, err)
        assert await _refusals(api) == [("U_SUPPORT2", "not_eligible")] * 2
        assert len((await api.call("GET", "/trust", as_="admin"))[1]["grants"]) == 1

        status, listed = await api.call("GET", "/trust", as_=None, headers=support)
        assert status == 200 and len(listed["grants"]) == 1, listed
        status, done = await api.call("DELETE", query, as_=None, headers=support)
        assert status == 200 and done == {"revoked": 1}, done

        # Nor does it end a handing-on of another role than its own (403, audited, still in force).
        given = {"delegate": "U_SUPPORT1", "until": "2027-01-20", "role": "finance"}
        status, handed = await api.call("POST", "/delegations", as_="fin1", json=given)
        assert status == 201, handed
        end = {"id": handed["id"]}
        status, problem = await api.call("POST", "/delegations/end", as_=None, headers=support, json=end)
        assert status == 403 and problem["error"]["code"] == "not_eligible", problem
        assert await _refusals(api) == [("U_SUPPORT2", "not_eligible")] * 3
        in_force = (await api.call("GET", "/delegations", as_="admin"))[1]["delegations"]
        assert [d["id"] for d in in_force] == [handed["id"]]
        status, ended = await api.call("POST", "/delegations/end", as_="admin", json=end)
        assert status == 200 and ended["ended_by"] == "U_SUPPORT2", ended

        # Oversight is the admin role's (oversight.admin_role, as /hitl halt asks of a person): a token narrowed to
        # other roles neither halts, unhalts nor reads the practice approvals or the figures per reviewer.
        for method, path, body in (
            ("POST", "/halt", {"tool": "refund", "reason": "mine to stop?"}),
            ("POST", "/unhalt", {"tool": "refund"}),
            ("GET", "/practice", None),
            ("GET", "/reviewers?since=7d", None),
        ):
            status, problem = await api.call(method, path, as_=None, headers=support, json=body)
            assert status == 403 and problem["error"]["code"] == "not_eligible", (path, problem)
        assert await _refusals(api) == [("U_SUPPORT2", "not_eligible")] * 7
        assert (await api.call("GET", "/halts", as_="admin"))[1]["halts"] == []


async def test_the_figures_per_reviewer_are_for_admins(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch) as api:
        await trusted_refund(api)
        status, problem = await api.call("GET", "/reviewers", as_="sup1")
        assert status == 403 and await _refusals(api) == [("U_SUPPORT1", "missing_scope")]
        status, problem = await api.call("GET", "/reviewers?since=0d", as_="admin")
        assert status == 422
        status, figures = await api.call("GET", "/reviewers?since=7d", as_="admin")
        assert status == 200
        assert [(r["reviewer"], r["decisions"]) for r in figures["reviewers"]] == [("U_SUPPORT1", 1)]


async def test_a_request_without_a_valid_token_is_audited_and_a_flood_is_counted(
    tmp_path: Path, clock: FakeClock
) -> None:
    async with sqlite_api(tmp_path, clock) as api:
        burst, past = 30, 7  # hitl.api.unauthenticated.Unauthenticated's default burst; then one a second
        for i in range(burst + past):
            headers = {"Authorization": "Bearer not-a-token"} if i % 2 else {}
            status, body = await api.call("GET", "/approvals", as_=None, headers=headers)
            assert (status, body["error"]["code"]) == (401, "unauthorized")
        refusals = await _refusals(api)
        # Each within the burst is an entry; those past it are held and named by the next entry.
        assert burst <= len(refusals) <= burst + past and set(refusals) == {("unauthenticated", "unauthorized")}
        entries = await api.h.rt.runtime.store.audit.entries(limit=500)
        assert "GET /api/v1/approvals via api from 127.0.0.1" in entries[-1].detail


async def test_refusals_past_the_rate_are_named_by_the_next_entry(tmp_path: Path) -> None:
    """The flood rule on its own, with the limiter's clock in the test's hands."""
    clock, ticks = FakeClock(), FakeClock()
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        refusals = Unauthenticated(store, clock, rate=1.0, burst=3, limiter=RateLimiter(now=ticks.now))
        for _ in range(8):
            await refusals.refused(surface="api", address="10.0.0.9", what="GET /api/v1/approvals")
        assert refusals.held("api", "10.0.0.9") == 5
        ticks.advance(1.0)
        await refusals.refused(surface="api", address="10.0.0.9", what="GET /api/v1/approvals")
        entries = [e for e in await store.audit.entries() if e.event == "refused"]
        assert len(entries) == 4 and refusals.held("api", "10.0.0.9") == 0
        assert entries[-1].detail.endswith("(and 5 more from this address since its last entry)")
    finally:
        await store.close()
