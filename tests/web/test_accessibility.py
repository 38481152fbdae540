"""The web inbox and the decision page for everyone (issue 69, item 4), in headless Chromium through a real
`hitl serve` signed in at the real provider: keyboard alone finds an approval in the inbox and decides it; axe-core
(installed from npm as @axe-core/playwright 4.14.0, tests/web/axe) finds no serious or critical violation on either
page; at 320 px wide (a phone) and at 200% zoom neither page scrolls sideways."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.sandbox.test_browser import ARGS, CHROMIUM, DOCS_SHOTS, keep_or_write
from tests.waiting import eventually
from tests.web.conftest import Inbox
from tests.web.test_decision_page import paused_refund, sign_in_at_provider

AXE = Path(__file__).parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
VIOLATIONS = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
    .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))}))"""
FIXED = """() => {
    // The docs' picture: ids, times and the time left set to fixed values (they differ at each run).
    const ids = new Map();
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
        node.textContent = node.textContent
            .replace(/apr_[A-Za-z0-9]{10}/g,
                     id => ids.get(id) ?? (ids.set(id, `apr_DOCS00000${ids.size + 1}`), ids.get(id)))
            .replace(/\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2} UTC/g, "2026-11-28 13:00 UTC")
            .replace(/\\d+ (min|h) left/g, "59 min left");
    }
}"""
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `make test` installs it (scripts/ensure-chromium)")
    if not AXE.exists():
        pytest.fail("axe-core is missing: run scripts/ensure-node")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def signed_in(browser: Browser, inbox: Inbox, who: str, **options: Any) -> Page:
    # bypass_csp: the pages allow no script at all, and axe-core is one (the test's, not the page's)
    page = await (await browser.new_context(bypass_csp=True, **options)).new_page()
    await page.goto(f"{inbox.url}/inbox")
    await sign_in_at_provider(page, who)
    await expect(page.locator("h1").first).to_be_visible()
    assert page.url == f"{inbox.url}/inbox"
    return page


async def inbox_shot(page: Page) -> None:
    """The inbox's screenshot, compared with the one in the docs."""
    await page.evaluate(FIXED)
    await page.set_viewport_size({"width": 900, "height": 900})
    await page.mouse.move(1, 1)
    body = page.locator("body")
    keep_or_write(DOCS_SHOTS / "web-inbox.png", await body.screenshot(), await body.inner_text())


async def serious(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations on the page that are serious or critical."""
    await page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = await page.evaluate(VIOLATIONS)
    return [v for v in found if v["impact"] in ("serious", "critical")]


async def test_axe_finds_nothing_serious_and_neither_page_scrolls_sideways(inbox: Inbox) -> None:
    decided = await paused_refund(inbox, 75)
    approval_id = await paused_refund(inbox, 80, "A long note: " + "crushed " * 40)
    decision_page = f"{inbox.url}/inbox/approvals/{approval_id}"
    async with chromium() as browser:
        page = await signed_in(browser, inbox, "U_SUPPORT1")
        await page.goto(f"{inbox.url}/inbox/approvals/{decided}")
        await page.locator("form.approve").get_by_role("button", name="Approve").click()
        await expect(page.locator(".outcome")).to_contain_text("U_SUPPORT1 approved")

        async def ran() -> bool:  # the screenshot shows the refund done, not caught between approved and executed
            await page.goto(f"{inbox.url}/inbox")
            await expect(page.locator("ul.history li")).to_have_count(1)  # filters, waiting and history all drawn
            return "executed" in await page.locator("ul.history li").inner_text()

        await eventually(ran, what="the approved refund executed", interval=0.2)
        await expect(page.locator("ul.inbox li")).to_have_count(1)
        assert await serious(page) == []
        await inbox_shot(page)
        await page.goto(decision_page)
        assert await serious(page) == []
        for options in ({"viewport": {"width": 320, "height": 640}}, {"viewport": {"width": 640, "height": 450}}):
            # 640 css px: a 1280 px window at 200% zoom (device_scale_factor draws it as the zoomed window does)
            narrow = await signed_in(browser, inbox, "U_SUPPORT1", device_scale_factor=2, **options)
            await expect(narrow.locator("ul.history li")).to_have_count(1)
            assert await narrow.evaluate(OVERFLOW) <= 0, options
            await narrow.goto(decision_page)
            assert await narrow.evaluate(OVERFLOW) <= 0, options


async def tab_to(page: Page, check: str, wanted: str, what: str) -> None:
    """Press Tab until ``check`` (a script on the focused element) gives ``wanted``."""
    for _ in range(40):
        await page.keyboard.press("Tab")
        if await page.evaluate(f"() => {check}") == wanted:
            return
    raise AssertionError(f"Tab never reached {what}")


async def test_the_keyboard_alone_searches_the_inbox_by_id_and_approves(inbox: Inbox) -> None:
    other = await paused_refund(inbox, 60)
    approval_id = await paused_refund(inbox, 75)
    async with chromium() as browser:
        page = await signed_in(browser, inbox, "U_SUPPORT1")
        await tab_to(page, "document.activeElement.id", "f-id", "the search by id")
        await page.keyboard.type(approval_id)
        await page.keyboard.press("Enter")  # submits the filters' form
        await expect(page.locator("ul.inbox li")).to_have_count(1)
        target = f"/inbox/approvals/{approval_id}"
        await tab_to(page, "document.activeElement.getAttribute('href')", target, "the approval's link")
        await page.keyboard.press("Enter")
        await expect(page).to_have_url(f"{inbox.url}{target}")
        await tab_to(page, "document.activeElement.textContent.trim()", "Approve", "the Approve button")
        await page.keyboard.press("Enter")
        await expect(page.locator(".outcome")).to_contain_text("U_SUPPORT1 approved")
        await page.goto(f"{inbox.url}/inbox")
        await expect(page.locator("ul.inbox li")).to_have_count(1)
        await expect(page.locator(f'ul.inbox a[href="/inbox/approvals/{other}"]')).to_have_count(1)
