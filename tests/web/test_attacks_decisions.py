"""Decisions forged by hand against a real `hitl serve`, signed in at the real provider: a form without the view
and action hash the page drew would be recorded as "no view shown", which a web decision never is."""

from __future__ import annotations

from hitl.engine.domain.models import Status
from hitl.engine.storage import open_store
from tests.web.conftest import Inbox, browser, sign_in
from tests.web.test_decision_page import paused_refund
from tests.web.test_page_decisions import approval, form_of, page_of, post


async def test_a_decision_without_the_pages_view_digest_or_action_hash_is_refused(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75)
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT1")
        form = form_of(await page_of(http, inbox, approval_id), "approve")
        for left_out in ({"view_digest"}, {"action_hash"}, {"view_digest", "action_hash"}):
            forged = {k: v for k, v in form.items() if k not in left_out}
            status, page = await post(http, inbox, approval_id, forged)
            assert status == 422 and "reload the page" in page, (left_out, status)
        for bad in ({"view_digest": "x" * 64}, {"action_hash": form["action_hash"].upper()}):
            status, page = await post(http, inbox, approval_id, {**form, **bad})
            assert status == 422 and "reload the page" in page, (bad, status)
        assert (await approval(inbox, approval_id)).status is Status.PENDING
        status, _ = await post(http, inbox, approval_id, form)  # the page's own form still decides
        assert status == 303
    store = open_store(inbox.env["HITL_STORE"])
    try:
        decided = [e for e in await store.audit.entries(approval_id=approval_id) if e.event == "decided"]
    finally:
        await store.close()
    assert len(decided) == 1 and decided[0].view_digest == form["view_digest"]
