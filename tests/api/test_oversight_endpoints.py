"""What the CLI's remote mode needs over HTTP, each with its scope: the trust grants in force (``GET /trust``, only
those of tools the token may decide), ending them (``DELETE /trust``, ``decide`` and the right to decide the tool),
and the figures per reviewer (``GET /reviewers``, ``admin``). Every refusal is an audit entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.testing import FakeClock
from tests.api.conftest import Api, sqlite_api, trusted_refund


async def _refusals(api: Api) -> list[tuple[str, str]]:
    entries = await api.h.rt.runtime.store.audit.entries(limit=500)
    return [(e.actor, e.outcome) for e in entries if e.event == "refused"]


async def test_trust_grants_over_the_api_each_with_its_scope(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_SHOP_DB", str(tmp_path / "shop.db"))
    async with sqlite_api(tmp_path, clock) as api:
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


async def test_the_figures_per_reviewer_are_for_admins(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HITL_SHOP_DB", str(tmp_path / "shop.db"))
    async with sqlite_api(tmp_path, clock) as api:
        await trusted_refund(api)
        status, problem = await api.call("GET", "/reviewers", as_="sup1")
        assert status == 403 and await _refusals(api) == [("U_SUPPORT1", "missing_scope")]
        status, problem = await api.call("GET", "/reviewers?since=0d", as_="admin")
        assert status == 422
        status, figures = await api.call("GET", "/reviewers?since=7d", as_="admin")
        assert status == 200
        assert [(r["reviewer"], r["decisions"]) for r in figures["reviewers"]] == [("U_SUPPORT1", 1)]
