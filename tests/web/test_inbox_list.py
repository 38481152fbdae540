"""The web inbox lists exactly what `GET /api/v1/approvals` returns to a read-and-decide token of the same reviewer
id (`hitl token new`) as theirs to decide: the same approvals in the same order (one due soon first, as the API
puts it), over approvals for several roles, a practice twin, one the reviewer already approved, and decided ones."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp

from tests.waiting import eventually
from tests.web.conftest import Inbox, browser, serving, sign_in
from tests.web.test_role_reload import add_tokens, new_token

RULES = "  rules:\n"
OPS_RULE = """  rules:
    - name: odd_refund
      tools: [refund]
      when: "args.amount == 77"
      tier: approve
      role: ops
"""
PRACTICE = """
oversight:
  practice:
    delay: 0
    tools: {delete_customer: 1.0}
    defects:
      delete_customer:
        - {name: wrong_customer, set: {customer_id: "C-0000"}, says: "the customer is not the one asked about"}
"""


def _edit(text: str) -> str:
    """U_SUPPORT1 in support and finance; refunds of 77 to ops; customer deletions due within 5 minutes (due soon
    from the start), each with a practice twin."""
    for old, new in [
        ("finance: [U_FIN1, U_FIN2, U_FIN3]", "finance: [U_FIN1, U_FIN2, U_FIN3, U_SUPPORT1]\n  ops: [U_FIN3]"),
        (
            "{tier: approve, role: support, trustable: false,",
            "{tier: approve, role: support, timeout: 5m, trustable: false,",
        ),
        (RULES, OPS_RULE),
    ]:
        assert old in text
        text = text.replace(old, new, 1)
    return text + PRACTICE


async def propose(
    http: aiohttp.ClientSession, inbox: Inbox, token: str, n: int, tool: str, args: dict[str, Any]
) -> str:
    body = {"session": f"chat-{n}", "tool": tool, "idempotency_key": f"call-{n}", "args": args}
    async with http.post(f"{inbox.url}/api/v1/proposals", json=body, headers=_bearer(token)) as r:
        assert r.status in (200, 201), await r.text()
        answer = await r.json()
    assert answer["verdict"] == "pending", answer
    approval_id: str = answer["approval"]["id"]
    return approval_id


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def decide(http: aiohttp.ClientSession, inbox: Inbox, token: str, approval_id: str, kind: str) -> None:
    """``kind`` on the approval through the API, bound to the version and hash it reads."""
    url = f"{inbox.url}/api/v1/approvals/{approval_id}"
    async with http.get(url, headers=_bearer(token)) as r:
        seen = await r.json()
    body = {"decision": kind, "expected_version": seen["version"], "action_hash": seen["action_hash"], "reason": "no"}
    async with http.post(f"{url}/decisions", json=body, headers=_bearer(token)) as r:
        assert r.status == 200, await r.text()


async def test_the_inbox_lists_what_the_api_gives_a_token_of_the_same_reviewer(tmp_path: Path) -> None:
    async with serving(tmp_path, edit=_edit) as inbox, aiohttp.ClientSession() as http, browser() as web:
        agent, agent_entry = await new_token(inbox, "agent", "agent:remote", "read", "propose")
        reviewer, reviewer_entry = await new_token(inbox, "support1", "U_SUPPORT1", "read", "decide")
        add_tokens(inbox, agent_entry, reviewer_entry)

        def refund(n: int, amount: int) -> dict[str, Any]:
            return {"order_id": f"O-{n}", "customer_id": f"C-{n}", "amount": amount}

        escalated = await propose(http, inbox, agent, 1, "refund", refund(1, 900))  # finance, two approvers
        approved_once = await propose(http, inbox, agent, 2, "refund", refund(2, 950))
        plain = await propose(http, inbox, agent, 3, "refund", refund(3, 40))  # support
        rejected = await propose(http, inbox, agent, 4, "refund", refund(4, 60))
        theirs = await propose(http, inbox, agent, 5, "refund", refund(5, 77))  # ops: not U_SUPPORT1's
        due = await propose(http, inbox, agent, 6, "delete_customer", {"customer_id": "C-6"})  # due soon
        await decide(http, inbox, reviewer, approved_once, "approve")  # one of two: still pending
        await decide(http, inbox, reviewer, rejected, "reject")

        async def listed() -> list[tuple[str, str]] | None:
            url = f"{inbox.url}/api/v1/approvals?decidable=true&limit=200"
            async with http.get(url, headers=_bearer(reviewer)) as r:
                assert r.status == 200, await r.text()
                items = (await r.json())["items"]
            found = [(i["id"], i["status"]) for i in items]
            return found if len(found) == 4 else None  # the practice twin planted too

        api = await eventually(listed, what="the practice twin in the API's list")
        ids = [i for i, _ in api]
        assert {escalated, plain, due} < set(ids) and not {approved_once, rejected, theirs} & set(ids)
        assert {status for _, status in api} == {"pending"}
        assert ids.index(due) < ids.index(escalated)  # due soon comes first, whatever its tier

        await sign_in(web, inbox, "U_SUPPORT1")
        async with web.get(f"{inbox.url}/inbox") as r:
            assert r.status == 200
            page = await r.text()
        assert re.findall(r'<li><a href="/inbox/approvals/([^"]+)">', page) == ids
