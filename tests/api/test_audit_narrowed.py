"""`GET /audit` through `hitl serve`, and `hitl audit` (a real process) through it: an admin token narrowed to roles
reads only the entries of the approvals within its roles (the rule by which it decides or withdraws one), none tied
to no approval; one narrowed to nothing reads the whole trail, whose chains still verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hitl.api import token_hash
from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import Api, pending_refund, shop_api

ADMIN_SUPPORT, ADMIN_FINANCE = "tok-audit-support", "tok-audit-finance"
NARROWED = "".join(
    f"    - {{name: {name}, sha256: {token_hash(token)}, reviewer: ops:{name}, scopes: [admin], roles: [{role}]}}\n"
    for name, token, role in (("admin-support", ADMIN_SUPPORT, "support"), ("admin-finance", ADMIN_FINANCE, "finance"))
)
"""Two admin tokens narrowed to one role each (more entries of the ``api.tokens`` list the configuration ends with)."""


async def _audit(api: Api, token: str, limit: int = 200) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    status, body = await api.call("GET", f"/audit?limit={limit}", as_=None, headers=headers)
    assert status == 200, body
    return list(body["entries"])


async def test_a_role_narrowed_admin_token_reads_only_the_trail_of_its_roles_approvals(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with shop_api(tmp_path, clock, monkeypatch, extra=NARROWED) as api:
        small, large = await pending_refund(api, "k-small", 20), await pending_refund(api, "k-large", 900)
        status, _ = await api.call("GET", "/audit", as_="sup1")  # refused: an entry tied to no approval
        assert status == 403

        everything = await _audit(api, "tok-admin")
        assert {e["approval_id"] for e in everything} == {small, large, None}
        stored = await api.h.service.store.audit.entries(limit=200)
        said = [(e["event"], e["approval_id"], e["actor"], e["detail"]) for e in everything]
        assert said == [(e.event, e.approval_id, e.actor, e.detail) for e in stored]  # the whole trail

        support = await _audit(api, ADMIN_SUPPORT)
        assert support and {e["approval_id"] for e in support} == {small}
        assert support == [e for e in everything if e["approval_id"] == small]
        finance = await _audit(api, ADMIN_FINANCE)
        assert finance and finance == [e for e in everything if e["approval_id"] == large]
        assert await _audit(api, ADMIN_SUPPORT, limit=1) == support[-1:]  # the newest of what it may read

        env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": ADMIN_SUPPORT, "HITL_STORE": "sqlite:///nonexistent/x.db"}
        code, body, err = await hitl("audit", "--json", env=env)
        assert code == 0 and [e["approval_id"] for e in body["audit"]] == [small] * len(support), (body, err)

        checked, broken = await api.h.service.store.audit.verify()  # the full trail's chains: untouched
        assert broken is None and checked >= len(everything)
