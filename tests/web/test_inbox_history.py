"""The web inbox's history, filters, search and paging (issue 69), on a real `hitl serve` signed in at the real
provider: pending in the queue's order with why each ranks there, the decided history with who decided, each row
linking to its decision page and its Slack message; filters by tool, tier, requester, reviewer, status and date;
search by id; the store's cursor; a row decided through the API shows decided on the next load; a query that does
not read gets a 400 that names the field."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import aiohttp

from hitl.engine.domain.records import MessageRef
from hitl.engine.storage import open_store
from tests.waiting import eventually
from tests.web.conftest import Inbox, browser, serving, sign_in
from tests.web.test_decision_page import card_of
from tests.web.test_inbox_list import _edit, decide, propose
from tests.web.test_page_decisions import form_of, page_of, post
from tests.web.test_role_reload import add_tokens, new_token


def waiting(page: str) -> list[str]:
    return re.findall(r'<li><a href="/inbox/approvals/([^"]+)">', page)


def history(page: str) -> list[str]:
    return re.findall(r'<li class="decided" data-id="([^"]+)">', page)


async def load(web: aiohttp.ClientSession, inbox: Inbox, query: str = "", status: int = 200) -> str:
    async with web.get(f"{inbox.url}/inbox{query}") as r:
        text = await r.text()
        assert r.status == status, text
        return text


def refund(n: int, amount: int) -> dict[str, Any]:
    return {"order_id": f"O-{n}", "customer_id": f"C-{n}", "amount": amount}


async def test_history_filters_search_paging_and_the_next_load(tmp_path: Path) -> None:
    async with serving(tmp_path, edit=_edit) as inbox, aiohttp.ClientSession() as http, browser() as web:
        agent, agent_entry = await new_token(inbox, "agent", "agent:remote", "read", "propose")
        reviewer, reviewer_entry = await new_token(inbox, "support1", "U_SUPPORT1", "read", "decide")
        add_tokens(inbox, agent_entry, reviewer_entry)
        big = await propose(http, inbox, agent, 1, "refund", refund(1, 900))  # escalated: finance (U_SUPPORT1 in it)
        small = await propose(http, inbox, agent, 2, "refund", refund(2, 40))
        rejected = await propose(http, inbox, agent, 3, "refund", refund(3, 60))
        approved = await propose(http, inbox, agent, 4, "refund", refund(4, 50))
        await decide(http, inbox, reviewer, rejected, "reject")
        await decide(http, inbox, reviewer, approved, "approve")
        card = await eventually(lambda: _card(inbox, small), what="the card of the small refund in Slack")

        await sign_in(web, inbox, "U_SUPPORT1")
        page = await load(web, inbox)
        assert waiting(page) == [big, small]  # escalated first, as the Home tab ranks them
        assert "escalated" in unescape(page) and 'class="why"' in page
        assert set(history(page)) == {rejected, approved}
        assert "reject by U_SUPPORT1" in page and "approve by U_SUPPORT1" in page
        assert f'href="https://slack.com/archives/{card.channel}/p{card.ts.replace(".", "")}"' in page
        assert f'href="/inbox/approvals/{approved}"' in page

        filtered = {
            "?status=rejected": ([], [rejected]),
            "?status=pending": ([big, small], []),
            "?tier=escalate": ([big], []),
            "?reviewer=U_SUPPORT1&status=decided": ([], "both"),
            "?requester=someone-else": ([], []),
            "?tool=delete_customer": ([], []),
            "?since=2999-01-01": ([], []),
            "?since=2000-01-01&until=2999-01-01&tool=refund": ([big, small], "both"),
            f"?id={approved}": ([], [approved]),
            f"?id={small}": ([small], []),
        }
        for query, (pending, decided) in filtered.items():
            shown = await load(web, inbox, query)
            assert waiting(shown) == pending, query
            expected = {rejected, approved} if decided == "both" else set(decided)
            assert set(history(shown)) == expected, query
        assert "No approval nope-0 that you may read" in await load(web, inbox, "?id=nope-0")

        first = await load(web, inbox, "?status=decided&limit=1")
        older = re.search(r'<a href="(/inbox\?[^"]+)" rel="next">Older</a>', first)
        assert older is not None and len(history(first)) == 1
        second = await load(web, inbox, unescape(older[1]).removeprefix("/inbox"))
        assert set(history(first) + history(second)) == {rejected, approved}

        top = await load(web, inbox, "?status=pending&limit=1")  # the queue paged in its own order
        more = re.search(r'<a href="(/inbox\?[^"]+)" rel="next">More</a>', top)
        assert more is not None and waiting(top) == [big] and "status=pending" in more[1]
        assert waiting(await load(web, inbox, unescape(more[1]).removeprefix("/inbox"))) == [small]

        await decide(http, inbox, reviewer, small, "reject")  # through the API, while the page is open
        again = await load(web, inbox)
        assert waiting(again) == [big] and small in history(again)

        # A group card: the bot records each member on the one message (here written to the served store as it does)
        store = open_store(inbox.env["HITL_STORE"])
        try:
            for member in (rejected, approved):
                await store.messages.set(member, MessageRef(channel="C_GROUP", ts="1764370000.000100"))
        finally:
            await store.close()
        grouped = await load(web, inbox, "?status=any")
        marked = re.findall(r'data-id="([^"]+)">[^\n]*?<span class="group">group</span> · <a href="([^"]+)"', grouped)
        assert sorted(marked) == sorted(
            (m, "https://slack.com/archives/C_GROUP/p1764370000000100") for m in (rejected, approved)
        )
        assert grouped.count('class="group"') == 2  # the pending one's own card is not a group

        for query, field in [("?tier=urgent", "tier"), ("?colour=red", "colour"), ("?limit=0", "limit")]:
            refused = await load(web, inbox, query, status=400)
            assert field in refused and "fix the filter" in refused
        assert "Traceback" not in (inbox.cwd / "serve.log").read_text()


async def _card(inbox: Inbox, approval_id: str) -> Any:
    return card_of(inbox, approval_id)


async def test_a_page_open_while_the_api_decides_gets_the_version_checks_answer_in_words(tmp_path: Path) -> None:
    async with serving(tmp_path) as inbox, aiohttp.ClientSession() as http, browser() as web:
        agent, agent_entry = await new_token(inbox, "agent", "agent:remote", "read", "propose")
        other, other_entry = await new_token(inbox, "support2", "U_SUPPORT2", "read", "decide")
        add_tokens(inbox, agent_entry, other_entry)
        approval_id = await propose(http, inbox, agent, 1, "refund", refund(1, 40))
        await sign_in(web, inbox, "U_SUPPORT1")
        assert waiting(await load(web, inbox)) == [approval_id]
        form = form_of(await page_of(web, inbox, approval_id), "approve")  # the page open in a tab

        await decide(http, inbox, other, approval_id, "reject")  # elsewhere, meanwhile
        status, answer = await post(web, inbox, approval_id, form)
        assert status == 409
        assert f"{approval_id} was already decided by U_SUPPORT2 (now rejected); nothing changed" in unescape(answer)
        page = await load(web, inbox)  # the next load
        assert waiting(page) == [] and history(page) == [approval_id]
        assert "reject by U_SUPPORT2" in page


async def test_a_filtered_history_page_holds_the_matching_rows_from_further_back(tmp_path: Path) -> None:
    # Two customer deletions U_SUPPORT2 approved, then five refunds U_SUPPORT1 rejected: a page of two filtered to
    # the deletions (or to U_SUPPORT2's decisions) read only the newest two rows before (two refunds) and showed
    # none, with an "Older" link; the store answers the filter, so the page holds both, and no link.
    async with serving(tmp_path) as inbox, aiohttp.ClientSession() as http, browser() as web:
        agent, agent_entry = await new_token(inbox, "agent", "agent:remote", "read", "propose")
        first, first_entry = await new_token(inbox, "support1", "U_SUPPORT1", "read", "decide")
        second, second_entry = await new_token(inbox, "support2", "U_SUPPORT2", "read", "decide")
        add_tokens(inbox, agent_entry, first_entry, second_entry)
        deleted = [await propose(http, inbox, agent, n, "delete_customer", {"customer_id": f"C-{n}"}) for n in (1, 2)]
        for approval_id in deleted:
            await decide(http, inbox, second, approval_id, "approve")
        for n in range(3, 8):
            await decide(http, inbox, first, await propose(http, inbox, agent, n, "refund", refund(n, 40)), "reject")

        await sign_in(web, inbox, "U_SUPPORT1")
        newest_first = deleted[::-1]
        for query in (
            "?tool=delete_customer&status=decided&limit=2",
            "?reviewer=U_SUPPORT2&limit=2",
            "?reviewer=U_SUPPORT2&since=2000-01-01&until=9999-12-31&limit=2",  # the last day there is: no overflow
        ):
            page = await load(web, inbox, query)
            assert history(page) == newest_first, query
            assert 'rel="next"' not in page, query
        one = await load(web, inbox, "?reviewer=U_SUPPORT2&status=approved&limit=1")
        older = re.search(r'<a href="(/inbox\?[^"]+)" rel="next">Older</a>', one)
        assert history(one) == newest_first[:1] and older is not None
        rest = await load(web, inbox, unescape(older[1]).removeprefix("/inbox"))
        assert history(rest) == newest_first[1:] and 'rel="next"' not in rest
