"""The decision page under the rules Slack's card keeps, through a real `hitl serve`, a real OpenID Connect provider
and real CLI subprocesses: values drawn within the card's bounds with "Show in full" behind the same authorization
as Slack's view, a delegate deciding (and refused once the delegation ended), typed confirmation, and practice twins
that look like real approvals until decided."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hitl.api import token_hash
from hitl.engine.domain.models import ApprovalKind, Status
from hitl.engine.storage import open_store
from tests.web.conftest import Inbox, browser, cli_run, serving, sign_in
from tests.web.test_decision_page import paused_refund
from tests.web.test_page_decisions import approval, form_of, page_of, post

AGENT_TOKEN = "tok-web-agent"
EXTRA = f"""
api:
  tokens:
    - {{name: agent, sha256: {token_hash(AGENT_TOKEN)}, reviewer: 'agent:remote', scopes: [read, propose]}}
oversight:
  spot_check:
    tools: {{look_up_order: 1.0}}
  practice:
    delay: 0
    tools: {{delete_customer: 1.0}}
    defects:
      delete_customer:
        - {{name: wrong_customer, set: {{customer_id: "C-0000"}}, says: "the customer is not the one asked about"}}
"""
LARGE = '      reason: "refund over 500 needs two finance approvers"\n'


def _edit(text: str) -> str:
    assert LARGE in text
    return text.replace(LARGE, LARGE + "      confirm: [amount]\n") + EXTRA


@pytest.fixture
async def ruled(tmp_path: Path) -> AsyncIterator[Inbox]:
    """The web inbox with an agent's API token, typed confirmation on large refunds, a practice twin for every
    customer deletion, and a spot check of every order look-up."""
    async with serving(tmp_path, edit=_edit) as running:
        yield running


async def propose(inbox: Inbox, args: dict[str, Any]) -> str:
    """An agent proposes a customer deletion through the API: the pending approval's id."""
    body = {"session": "chat-1", "tool": "delete_customer", "idempotency_key": "call-1", "args": args}
    headers = {"Authorization": f"Bearer {AGENT_TOKEN}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{inbox.url}/api/v1/proposals", json=body, headers=headers) as r,
    ):
        assert r.status in (200, 201), await r.text()
        answer = await r.json()
    assert answer["verdict"] == "pending", answer
    approval_id: str = answer["approval"]["id"]
    return approval_id


async def hitl(inbox: Inbox, *args: str) -> str:
    """The hitl CLI against the inbox's store: its output (it must succeed)."""
    done = await cli_run(inbox, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def pending_of_kind(inbox: Inbox, kind: ApprovalKind) -> list[str]:
    """The ids of the approvals of ``kind`` waiting in ``inbox``'s store (the first ten by rank looked at)."""
    store = open_store(inbox.env["HITL_STORE"])
    try:
        pending = await store.approvals.list_pending(roles=None, limit=10, cursor=None, order="rank", now=0.0)
    finally:
        await store.close()
    return [a.id for a in pending.items if a.kind is kind]


async def get(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with http.get(url, allow_redirects=False) as r:
        return r.status, await r.text()


async def test_a_long_value_is_cut_as_on_the_card_and_shown_in_full_only_to_those_who_decide(ruled: Inbox) -> None:
    notes = "".join(f"line {i:05d} of the customer's file\n" for i in range(1000))  # 33,000 characters
    approval_id = await propose(ruled, {"customer_id": "C-1", "notes": notes})
    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT1")
        page = await page_of(http, ruled, approval_id)
        fields = re.search(r'<dl class="fields">.*?</dl>', page, re.S)
        assert fields is not None and "line 00000" in fields[0] and "line 00999" not in fields[0]  # cut as on the card
        assert f"of {len(notes):,} characters" in page
        link = re.search(r'<a href="(/inbox/approvals/[^"]+/values/1)">Show notes in full', page)
        assert link is not None, page
        status, first = await get(http, ruled.url + link[1])
        assert status == 200 and "Page 1 of 3" in first and "line 00000" in first and "line 00999" not in first
        status, last = await get(http, f"{ruled.url}{link[1]}?page=2")
        assert status == 200 and "Page 3 of 3" in last and "line 00999" in last
        assert (await get(http, f"{ruled.url}{link[1]}?page=x"))[0] == 404
        assert (await get(http, f"{ruled.url}/inbox/approvals/{approval_id}/values/7"))[0] == 404
    async with browser() as http:
        await sign_in(http, ruled, "U_FIN1")  # sees the approval (as a decide token does) but may not decide it
        status, refused = await get(http, ruled.url + link[1])
        assert status == 403 and "line 00000" not in refused
    store = open_store(ruled.env["HITL_STORE"])
    try:
        trail = await store.audit.entries(approval_id=approval_id)
    finally:
        await store.close()
    assert any(e.actor == "U_FIN1" and e.outcome == "not_eligible" for e in trail), trail


async def test_a_delegate_decides_on_the_page_and_an_ended_delegation_is_refused(ruled: Inbox) -> None:
    soon = (datetime.now(UTC) + timedelta(days=3)).date().isoformat()
    await hitl(ruled, "delegate", "give", "--as", "U_SUPPORT1", "--to", "U_FIN1", "--until", soon)
    first = await paused_refund(ruled, 40)
    second = await paused_refund(ruled, 45, session="s-2")
    async with browser() as http:
        await sign_in(http, ruled, "U_FIN1")
        form = form_of(await page_of(http, ruled, first), "approve")
        assert (await post(http, ruled, first, form))[0] == 303
        later = form_of(await page_of(http, ruled, second), "approve")  # drawn while the delegation holds
        await hitl(ruled, "delegate", "end", "--as", "U_SUPPORT1")
        status, page = await post(http, ruled, second, later)
        assert status == 403, page
        assert "You may not decide this one." in await page_of(http, ruled, second)
    done = await approval(ruled, first)
    assert done.status is not Status.PENDING and [(d.reviewer, d.via) for d in done.decisions] == [("U_FIN1", "web")]
    assert (await approval(ruled, second)).status is Status.PENDING


async def test_typed_confirmation_asks_for_the_value_and_refuses_a_wrong_one_under_its_field(ruled: Inbox) -> None:
    approval_id = await paused_refund(ruled, 900)
    async with browser() as http:
        await sign_in(http, ruled, "U_FIN1")
        page = await page_of(http, ruled, approval_id)
        assert 'name="confirm:amount"' in page
        form = form_of(page, "approve")
        status, refused = await post(http, ruled, approval_id, {**form, "confirm:amount": "90"})
        assert status == 422
        under = re.search(r'name="confirm:amount"[^>]*><span class="field-error" role="alert">([^<]+)</span>', refused)
        assert under is not None, refused  # Slack's words, under the field the reviewer typed in
        assert under[1] == "This is not the amount that runs; nothing was approved. Read it on the card again."
        status, missing = await post(http, ruled, approval_id, form)  # nothing typed
        assert status == 422 and "Type the amount you read on the card" in missing
        assert not (await approval(ruled, approval_id)).decisions
        assert (await post(http, ruled, approval_id, {**form, "confirm:amount": "900"}))[0] == 303
    done = await approval(ruled, approval_id)
    assert [(d.reviewer, d.kind, d.via) for d in done.decisions] == [("U_FIN1", "approve", "web")]


async def test_a_multiline_text_left_alone_in_the_modify_form_keeps_its_line_breaks(ruled: Inbox) -> None:
    notes = "first line\nsecond line"
    approval_id = await propose(ruled, {"customer_id": "C-1", "notes": notes})
    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT1")
        page = await page_of(http, ruled, approval_id)
        # HTML drops one line break right after <textarea>: the page writes one of its own before the value
        assert '<textarea name="arg:notes">\nfirst line\nsecond line</textarea>' in page


async def test_a_text_starting_with_a_line_break_keeps_it_in_the_modify_form_and_on_the_page(ruled: Inbox) -> None:
    notes = "\nsecond line"  # left alone in the form, a browser would submit "second line": a changed action
    approval_id = await propose(ruled, {"customer_id": "C-1", "notes": notes})
    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT1")
        page = await page_of(http, ruled, approval_id)
        assert '<textarea name="arg:notes">\n\nsecond line</textarea>' in page
        assert re.search(r'<pre class="value">\n(&quot;|")↵\nsecond line', page)  # shown with its mark, kept


async def test_a_practice_twin_looks_like_a_real_approval_until_its_decider_alone_is_told(ruled: Inbox) -> None:
    real = await propose(ruled, {"customer_id": "C-1"})
    [twin] = await pending_of_kind(ruled, ApprovalKind.PRACTICE)

    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT1")
        twin_page, real_page = await page_of(http, ruled, twin), await page_of(http, ruled, real)
        assert "practice" not in twin_page.lower()
        assert re.findall(r'class="decide (\w+)"', twin_page) == re.findall(r'class="decide (\w+)"', real_page)
        reject = form_of(twin_page, "reject")
        assert (await post(http, ruled, twin, {**reject, "reason": "wrong customer"}))[0] == 303
        told = await page_of(http, ruled, twin)
        assert "That was a practice check" in told and "You caught it." in told
        assert "That was a practice check" not in await page_of(http, ruled, twin)  # told once
    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT2")
        assert "practice" not in (await page_of(http, ruled, twin)).lower()  # the decider alone learns it


async def test_a_spot_check_asks_looks_right_or_flag_as_its_card_does(ruled: Inbox) -> None:
    await paused_refund(ruled, 30)  # its order look-up ran without a person, and is spot-checked
    [spot] = await pending_of_kind(ruled, ApprovalKind.SPOT_CHECK)
    async with browser() as http:
        await sign_in(http, ruled, "U_SUPPORT1")
        page = await page_of(http, ruled, spot)
        assert re.findall(r'class="decide (\w+)">', page) == ["approve", "reject"]  # no Modify, no Trust
        assert re.findall(r'<button type="submit">([^<]+)</button></form>', page)[-2:] == ["Looks right", "Flag"]
        flag = form_of(page, "reject")
        assert (await post(http, ruled, spot, {**flag, "reason": "wrong order"}))[0] == 303
    flagged = await approval(ruled, spot)
    assert flagged.status is Status.REJECTED and [(d.kind, d.via) for d in flagged.decisions] == [("reject", "web")]
