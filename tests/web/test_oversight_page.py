"""The web inbox's oversight page (issue 69, item 2) on a real `hitl serve` signed in at the real provider: the admin
role alone sees the figures per reviewer `hitl reviewers` gives, the practice catch rate with its 95% interval, and
who approved what in the audit trail's words; a reviewer outside the role gets a 403 that says who may."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from tests.waiting import eventually
from tests.web.conftest import Inbox, browser, serving, sign_in
from tests.web.test_inbox_history import load, refund
from tests.web.test_inbox_list import _edit, decide, propose
from tests.web.test_role_reload import add_tokens, new_token


def _with_admin(text: str) -> str:
    text = _edit(text)
    old = "ops: [U_FIN3]"
    assert old in text
    return text.replace(old, old + "\n  admin: [U_FIN3]", 1)


async def decidable(http: aiohttp.ClientSession, inbox: Inbox, token: str, n: int) -> list[str] | None:
    url = f"{inbox.url}/api/v1/approvals?decidable=true&limit=200"
    async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as r:
        ids = [i["id"] for i in (await r.json())["items"]]
    return ids if len(ids) == n else None


async def test_the_admin_role_sees_figures_the_catch_rate_and_who_approved_what(tmp_path: Path) -> None:
    async with serving(tmp_path, edit=_with_admin) as inbox, aiohttp.ClientSession() as http:
        agent, agent_entry = await new_token(inbox, "agent", "agent:remote", "read", "propose")
        reviewer, reviewer_entry = await new_token(inbox, "support1", "U_SUPPORT1", "read", "decide")
        add_tokens(inbox, agent_entry, reviewer_entry)
        approved = await propose(http, inbox, agent, 1, "refund", refund(1, 40))
        await propose(http, inbox, agent, 2, "delete_customer", {"customer_id": "C-2"})
        await decide(http, inbox, reviewer, approved, "approve")

        async def both() -> list[str] | None:  # the deletion and its practice twin, alike
            return await decidable(http, inbox, reviewer, 2)

        for approval_id in await eventually(both, what="the practice twin planted"):
            await decide(http, inbox, reviewer, approval_id, "reject")

        async with browser() as web:
            await sign_in(web, inbox, "U_SUPPORT1", path="/inbox/oversight")
            refused = await load(web, inbox, "/oversight", status=403)
            assert "only the admin role may see the oversight figures" in refused
        async with browser() as web:
            assert await sign_in(web, inbox, "U_FIN3", path="/inbox/oversight") == "/inbox/oversight"
            page = await load(web, inbox, "/oversight")
            row = re.search(r'<tr><th scope="row">U_SUPPORT1</th>((?:<td>\d+</td>)+)</tr>', page)
            assert row is not None and re.findall(r"\d+", row[1]) == ["2", "1", "1", "0", "0", "0"]  # practice apart
            assert "1 caught of 1 (100%; 95% interval 21% to 100%)" in page
            assert re.findall(
                r'<li class="approved">[^<]+<b>([^<]+)</b> · <a href="[^"]+">([^<]+)</a> · ([^<]+)</li>', page
            ) == [("U_SUPPORT1", approved, "approve via api:support1 -&gt; approved; no view shown")]
            assert "since:" in await load(web, inbox, "/oversight?since=soon", status=400)


async def test_without_an_admin_role_in_hitl_yaml_nobody_sees_the_oversight_page(tmp_path: Path) -> None:
    async with serving(tmp_path) as inbox, browser() as web:  # the refund example defines no admin role
        assert await sign_in(web, inbox, "U_FIN3", path="/inbox/oversight") == "/inbox/oversight"
        refused = await load(web, inbox, "/oversight", status=403)
        assert "only the admin role may see the oversight figures" in refused and "Figures per reviewer" not in refused
