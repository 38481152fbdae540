"""Deciding on the page under the same rules as a click, over HTTP through a real `hitl serve`: Modify through the
schema-built form with the schema's validation, quorum of distinct approvers, a stale page refused, a reject's
reason recorded."""

from __future__ import annotations

import re

import aiohttp

from hitl.engine.domain.models import Approval, Status
from hitl.engine.storage import open_store
from tests.web.conftest import Inbox, browser, cli_run, sign_in
from tests.web.test_decision_page import paused_refund


def form_of(page: str, kind: str) -> dict[str, str]:
    """The hidden and typed fields of the page's ``kind`` form (approve, reject, modify, trust)."""
    found = re.search(rf'<form method="post" action="[^"]+" class="decide {kind}">(.*?)</form>', page, re.S)
    assert found is not None, f"no {kind} form"
    inputs = re.findall(r'<input (?:type="hidden" )?name="([^"]+)" value="([^"]*)"', found[1])
    return dict(inputs)


async def page_of(http: aiohttp.ClientSession, inbox: Inbox, approval_id: str) -> str:
    async with http.get(f"{inbox.url}/inbox/approvals/{approval_id}") as r:
        assert r.status == 200
        return await r.text()


async def post(http: aiohttp.ClientSession, inbox: Inbox, approval_id: str, form: dict[str, str]) -> tuple[int, str]:
    url = f"{inbox.url}/inbox/approvals/{approval_id}/decisions"
    async with http.post(url, data=form, allow_redirects=False) as r:
        return r.status, await r.text()


async def approval(inbox: Inbox, approval_id: str) -> Approval:
    store = open_store(inbox.env["HITL_STORE"])
    try:
        return await store.approvals.get(approval_id)
    finally:
        await store.close()


async def test_modify_through_the_form_is_validated_by_the_tools_schema(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 60)
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        form = form_of(await page_of(http, inbox, approval_id), "modify")
        assert form["arg:amount"] == "60" and form["arg:order_id"] == "78291"
        status, page = await post(http, inbox, approval_id, {**form, "arg:amount": "-5"})
        assert status == 422 and "amount" in page  # the schema's refusal, on the page
        status, page = await post(http, inbox, approval_id, {**form, "arg:amount": "sixty"})
        assert status == 422 and "must be JSON" in page
        status, _ = await post(http, inbox, approval_id, {**form, "arg:amount": "40"})
        assert status == 303
    done = await approval(inbox, approval_id)
    assert done.status is not Status.PENDING and done.execute_args["amount"] == 40
    assert [(d.kind, d.via) for d in done.decisions] == [("modify", "web")]


async def test_two_finance_approvers_are_needed_and_one_cannot_count_twice(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 900)
    async with browser() as first, browser() as second:
        await sign_in(first, inbox, "U_FIN1")
        form = form_of(await page_of(first, inbox, approval_id), "approve")
        assert (await post(first, inbox, approval_id, form))[0] == 303
        assert (await approval(inbox, approval_id)).status is Status.PENDING  # one of two
        status, page = await post(first, inbox, approval_id, form)  # the same page again: stale now
        assert status == 409
        page = await page_of(first, inbox, approval_id)
        assert "You may not decide this one." in page  # their approval counts once
        await sign_in(second, inbox, "U_FIN2")
        theirs = form_of(await page_of(second, inbox, approval_id), "approve")
        assert (await post(second, inbox, approval_id, theirs))[0] == 303
    done = await approval(inbox, approval_id)
    assert done.status is not Status.PENDING and sorted(done.approvers) == ["U_FIN1", "U_FIN2"]


async def test_a_rejection_records_its_reason(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 20)
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT2")
        form = form_of(await page_of(http, inbox, approval_id), "reject")
        assert (await post(http, inbox, approval_id, {**form, "reason": "Customer withdrew"}))[0] == 303
        page = await page_of(http, inbox, approval_id)
    assert "U_SUPPORT2 rejected: Customer withdrew" in page
    assert (await approval(inbox, approval_id)).status is Status.REJECTED


async def test_under_the_stop_switch_the_page_offers_reject_alone_and_an_approve_is_refused(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 30)
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        approve = form_of(await page_of(http, inbox, approval_id), "approve")  # drawn before the halt
        halt = await cli_run(inbox, "halt", "--tool", "refund", "--reason", "bad refunds", "--as", "ops", timeout=60)
        assert halt.returncode == 0, halt.stderr
        page = await page_of(http, inbox, approval_id)
        assert "Stopped: halted by ops: bad refunds" in page
        assert 'class="decide approve"' not in page and 'class="decide reject"' in page
        status, page = await post(http, inbox, approval_id, approve)  # the form from before: refused all the same
        assert status in (409, 423) and "halted" in page
    assert (await approval(inbox, approval_id)).status is Status.PENDING
