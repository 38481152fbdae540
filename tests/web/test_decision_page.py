"""The decision page in headless Chromium through a real `hitl serve`: the card's "Open in browser" link, sign-in at a
real OpenID Connect provider, the page drawing the card's one view, a decision through the same call as a click (the
card updates, the run resumes once, the audit says web), and what one may not do there."""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp
from aiohttp import web
from playwright.async_api import Page, expect

from hitl.bot.views.controls import ACTION_OPEN_WEB
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, Status
from hitl.engine.storage import open_store
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.webapi import Message
from tests.bot.conftest import ROOT, SECRET
from tests.ports import free_port
from tests.sandbox.test_browser import DOCS_SHOTS, browser_page, keep_or_write
from tests.waiting import eventually
from tests.web.conftest import Inbox, browser, cli_run, refunds, sign_in


async def paused_refund(
    inbox: Inbox, amount: int, note: str = "The parcel arrived crushed.", *, session: str | None = None
) -> str:
    """`hitl run` of the refund example, paused at its approval: the approval's id."""
    run = await cli_run(
        inbox,
        *["run", str(ROOT / "examples/refund/workflow.yaml"), "--json"],
        *["--var", "order_id=78291", "--var", f"amount={amount}", "--var", f"note={note}"],
        *(["--session", session] if session else []),
    )
    assert run.returncode == 4, run.stderr
    approval_id: str = json.loads(run.stdout)["approval_id"]
    return approval_id


async def stored(inbox: Inbox, approval_id: str) -> Approval:
    """The approval as the store holds it."""
    store = open_store(inbox.env["HITL_STORE"])
    try:
        return await store.approvals.get(approval_id)
    finally:
        await store.close()


def card_of(inbox: Inbox, approval_id: str) -> Message | None:
    return next((m for m in inbox.state.messages if approval_id in m.text and not m.thread_ts), None)


def link_of(blocks: list[dict[str, Any]]) -> str | None:
    """The card's "Open in browser" address."""
    for block in blocks:
        for element in block.get("elements", []):
            if element.get("type") == "button" and element.get("text", {}).get("text") == "Open in browser":
                return str(element["url"])
    return None


async def sign_in_at_provider(page: Page, who: str) -> None:
    await page.fill("input[name='login']", who)
    await page.click("button[type='submit']")


async def docs_shot(page: Page) -> None:
    """The Web inbox page's screenshot, compared with the one in the docs (its id and times set to fixed values)."""
    fixed = "Asked by agent:riley · role support · 0 of 1 approval · expires 2026-11-28 14:00 UTC · apr_DOCS000001"
    await page.locator(".meta").evaluate("(el, text) => { el.textContent = text }", fixed)
    await page.set_viewport_size({"width": 900, "height": 1400})
    await page.mouse.move(1, 1)
    body = page.locator("body")
    keep_or_write(DOCS_SHOTS / "web-decision-page.png", await body.screenshot(), await body.inner_text())


async def test_a_reviewer_opens_the_card_link_signs_in_decides_and_the_card_updates(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75, session="ses_DOCS000001")  # named: the docs' picture names it
    card = await eventually(lambda: card_of(inbox, approval_id), what="the card hitl serve posts")
    link = link_of(card.blocks)
    assert link == f"{inbox.url}/inbox/approvals/{approval_id}"  # only the id in the address
    heading = card.blocks[0]["text"]["text"]
    async with aiohttp.ClientSession() as http:  # Slack sends the link's click too: acked, nothing else
        slack = Dispatcher(inbox.state, http, bot_url=f"{inbox.url}/slack/events", signing_secret=SECRET)
        assert (await slack.click("U_SUPPORT1", card, ACTION_OPEN_WEB)).status == 200
    async with browser_page() as page:
        await page.goto(link)
        assert page.url.startswith(inbox.issuer)  # signed out: to the provider first
        await sign_in_at_provider(page, "U_SUPPORT1")
        await expect(page.locator("h1.heading")).to_have_text(heading)  # the card's one view
        assert page.url == link  # back where the link pointed
        await expect(page.locator(".evidence-text")).to_have_text("The parcel arrived crushed.")
        await docs_shot(page)
        await page.locator("form.approve").get_by_role("button", name="Approve").click()
        await expect(page.locator(".outcome")).to_contain_text("U_SUPPORT1 approved")
        await expect(page.locator("form.decide")).to_have_count(0)

    def updated() -> Message | None:
        m = card_of(inbox, approval_id)
        heading = m.blocks[0]["text"]["text"].removeprefix("⚠ ") if m is not None else ""  # its marks first
        return m if m is not None and heading.startswith("Approved") else None

    done = await eventually(updated, what="the Slack card updated after the web decision")
    assert not any(b.get("block_id", "").startswith("hitl_actions") for b in done.blocks)  # no live buttons

    assert await eventually(lambda: refunds(inbox), what="the run to resume and refund") == [(75.0,)]  # once
    store = open_store(inbox.env["HITL_STORE"])
    try:
        approval = await store.approvals.get(approval_id)
        decided = [e for e in await store.audit.entries(approval_id=approval_id) if e.event == "decided"]
    finally:
        await store.close()
    assert approval.status is Status.EXECUTED
    assert [(d.reviewer, d.via) for d in approval.decisions] == [("U_SUPPORT1", "web")]
    assert len(decided) == 1 and decided[0].actor == "U_SUPPORT1" and decided[0].view_digest is not None


async def test_one_who_may_not_decide_sees_no_form_and_a_forged_post_is_refused(inbox: Inbox) -> None:
    approval_id = await paused_refund(inbox, 75)
    async with browser() as http:
        await sign_in(http, inbox, "U_FIN1")  # finance: a 75 refund is support's
        async with http.get(f"{inbox.url}/inbox/approvals/{approval_id}") as r:
            page = await r.text()
        assert r.status == 200 and "You may not decide this one." in page and "form" not in page.split("</header>")[1]
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        # Forged whole: the action hash and view digest a page would draw (a form lacking them is refused first).
        view = load_config(inbox.cwd / "hitl.yaml").present(await stored(inbox, approval_id))
        form = {"csrf": csrf[1], "decision": "approve", "expected_version": "1"}
        form |= {"action_hash": view.action_hash, "view_digest": view.digest()}
        async with http.post(f"{inbox.url}/inbox/approvals/{approval_id}/decisions", data=form) as r:
            assert r.status == 403
            assert "not" in (await r.text()).lower()
        async with http.post(f"{inbox.url}/inbox/approvals/{approval_id}/decisions", data={**form, "csrf": "x"}) as r:
            assert r.status == 403  # no token, no decision, whoever asks
        async with http.get(f"{inbox.url}/inbox/approvals/apr_0000000000") as r:
            assert r.status == 404
        async with http.get(f"{inbox.url}/inbox") as r:
            assert approval_id not in await r.text()  # not in their pending list either
    async with browser() as http:
        await sign_in(http, inbox, "U_SUPPORT2")
        async with http.get(f"{inbox.url}/inbox") as r:
            assert f"/inbox/approvals/{approval_id}" in await r.text()
    store = open_store(inbox.env["HITL_STORE"])
    try:
        assert (await store.approvals.get(approval_id)).status is Status.PENDING
    finally:
        await store.close()


async def test_a_cross_site_form_cannot_decide_for_a_signed_in_reviewer(inbox: Inbox) -> None:
    """Another site's page, open in the same Chromium as a signed-in reviewer's session, posts an Approve to the
    decision URL: the session cookie does not go with it (SameSite=Lax), nor could it know the CSRF token."""
    approval_id = await paused_refund(inbox, 75)
    target = f"{inbox.url}/inbox/approvals/{approval_id}/decisions"
    evil = web.Application()

    async def lure(request: web.Request) -> web.Response:
        body = (
            f'<form id="f" method="post" action="{target}"><input name="decision" value="approve">'
            '<input name="expected_version" value="1"><input name="csrf" value="guess"></form>'
            "<script>document.getElementById('f').submit()</script>"
        )
        return web.Response(text=body, content_type="text/html")

    evil.router.add_get("/", lure)
    runner = web.AppRunner(evil)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with browser_page() as page:
            await page.goto(f"{inbox.url}/inbox")
            await sign_in_at_provider(page, "U_SUPPORT1")
            await page.wait_for_url(f"{inbox.url}/inbox")
            async with page.expect_response(target) as answered:
                await page.goto(f"http://localhost:{port}/")  # another site (localhost is not 127.0.0.1)
            assert (await answered.value).status == 403
            await page.goto(f"{inbox.url}/inbox/approvals/{approval_id}")
            await expect(page.locator("form.approve")).to_have_count(1)  # still pending, still theirs to decide
    finally:
        await runner.cleanup()
    store = open_store(inbox.env["HITL_STORE"])
    try:
        assert (await store.approvals.get(approval_id)).status is Status.PENDING
    finally:
        await store.close()
