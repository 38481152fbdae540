"""The sandbox page in headless Debian Chromium, driven by Playwright: the whole loop as a person does it."""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, async_playwright, expect

from hitl.demo.examples import refund_example
from hitl.demo.launch import Sandbox, start_sandbox
from hitl.demo.scenario import HOSTILE_NOTE
from hitl.engine.domain.models import ApprovalKind
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.workflow.definition import load_workflow
from tests.waiting import eventually

if TYPE_CHECKING:
    from hitl.testing import FakeClock

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


async def refund(sb: Sandbox, amount: int, note: str, order: str = "78291", *, session: str | None = None) -> str:
    r = await sb.rt.lifecycle.start(
        load_workflow(refund_example() / "workflow.yaml"),
        {"order_id": order, "amount": str(amount), "note": note},
        session_id=session,
    )
    assert r.approval is not None
    await sb.rt.ctx.notifier.flush()  # its card posted before the next request: one card each, in this order
    return r.approval.id


def card(page: Page, approval_id: str):  # type: ignore[no-untyped-def]
    return page.locator(".msg:not(.thread .msg)", has_text=f"{approval_id}").first


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


@asynccontextmanager
async def browser_page(width: int = 1280, height: int = 900) -> AsyncIterator[Page]:
    """A page of headless Chromium at ``width`` x ``height``, closed after."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `make test` installs it (scripts/ensure-chromium)")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield await browser.new_page(viewport={"width": width, "height": height})
        finally:
            await browser.close()


async def test_the_approval_loop_in_a_browser(sandbox: Sandbox) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `make test` installs it (scripts/ensure-chromium)")
    small = await refund(sandbox, 120, HOSTILE_NOTE)
    mod = await refund(sandbox, 60, "Only the mug broke.", order="78300")
    rej = await refund(sandbox, 20, "Changed my mind.", order="78292")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            await page.goto(f"{sandbox.url}/?as=U_STRANGER")
            await expect(page.locator("#channel-title")).to_have_text("# refund-approvals")
            first = card(page, small)
            summary = "Approval needed: Refund USD 120.00 to “C-1042” for order “78291”"
            await expect(first).to_contain_text(summary)
            # The hostile note is shown literally, after the buttons: no link, no mention, no bold "APPROVED".
            evidence = first.locator(".b-quote", has_text="crushed")  # quoted rich text: shown as it is
            await expect(evidence).to_contain_text("<!channel> *APPROVED by Security*")
            await expect(evidence).to_contain_text("[email]")
            # The only links are each card's "Open in browser" to its page in hitl's web inbox (`web:` is on).
            hrefs = await page.locator("a[href]").evaluate_all("els => els.map(e => e.getAttribute('href'))")
            assert sorted(hrefs) == sorted(f"{sandbox.bot_url}/inbox/approvals/{i}" for i in (small, mod, rej))
            assert await first.locator("b", has_text="APPROVED").count() == 0

            await first.get_by_role("button", name="Approve").click()
            await expect(page.locator(".msg.ephemeral")).to_contain_text("You are not a reviewer")
            await shot(page, "1-stranger-refused")

            await page.select_option("#user", "U_SUPPORT1")
            await expect(page.locator(".msg.ephemeral")).to_have_count(0)  # ephemeral: only the stranger saw it
            await card(page, small).get_by_role("button", name="Approve").click()
            await expect(card(page, small)).to_contain_text("Approved and done: Refund USD 120.00", timeout=15000)
            await expect(card(page, small).locator(".thread")).to_contain_text("🏁 Run ses_", timeout=15000)
            await shot(page, "2-approved-and-done")

            await page.select_option("#user", "U_SUPPORT2")
            await card(page, mod).get_by_role("button", name="Modify").click()
            modal = page.locator(".modal")
            await expect(modal).to_contain_text("Modify action")
            amount = modal.locator("input[name='hitl_field:amount']")
            await amount.fill("-5")
            await page.click("#modal-submit")
            error = modal.locator(".field.invalid .error")
            await expect(error).to_contain_text("less than or equal to the minimum of 0")
            await expect(amount).to_have_value("-5")  # what the person typed survives the error
            await shot(page, "3-modify-inline-error")
            await amount.fill("900")
            await page.click("#modal-submit")
            await expect(page.locator("#overlay")).to_be_hidden()
            await expect(card(page, mod)).to_contain_text("Superseded: Refund USD 60.00")
            await page.get_by_text("# finance-approvals").click()
            escalation = page.locator(".msg", has_text="needs two finance approvers")
            await expect(escalation).to_contain_text("Approval needed: Refund USD 900.00")
            await expect(escalation.locator("pre.code", has_text="900").first).to_have_text("900")  # a number, boxed
            await shot(page, "4-escalation-card")

            await page.get_by_text("# refund-approvals").click()
            await card(page, rej).get_by_role("button", name="Reject").click()
            await expect(page.locator(".modal")).to_contain_text("Reject this action?")  # Slack's confirm dialog
            await page.click("#confirm-ok")
            await expect(page.locator(".modal")).to_contain_text("Why reject it?")
            await page.locator(".modal textarea").fill("Customer withdrew the request")
            await page.click("#modal-submit")
            await expect(card(page, rej)).to_contain_text("Rejected: Refund USD 20.00")
            await expect(card(page, rej)).to_contain_text("Customer withdrew the request")

            await page.select_option("#user", "U_FIN1")
            await page.fill("#composer-input", "/hitl pending")
            await page.press("#composer-input", "Enter")
            await expect(page.locator(".msg.ephemeral")).to_contain_text("1 approval waits on you")
            await shot(page, "5-hitl-pending")
            assert re.search(r"apr_[0-9A-Z]{10}", await page.locator(".msg.ephemeral").inner_text())
        finally:
            await browser.close()


async def test_the_sandbox_opens_as_someone_who_may_decide_its_first_card(sandbox: Sandbox) -> None:
    """A newcomer's first Approve is theirs to give: the page's default person holds the role of the default
    channel's cards (support, for the refund example), not one whose cards go to another channel."""
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(f"{sandbox.url}/sandbox/state") as r:
        state = await r.json()
    assert state["user"] == "U_SUPPORT1"


async def test_open_in_browser_signs_in_as_the_person_acting_in_the_sandbox(sandbox: Sandbox) -> None:
    """`make demo`'s web inbox: a card's "Open in browser" opens its page, signed in at the stand-in's "Sign in with
    Slack" as the person picked under Acting as; a decision there updates the card in the sandbox."""
    approval_id = await refund(sandbox, 120, "A note from the customer.")
    async with browser_page() as page:
        await page.goto(f"{sandbox.url}/?as=U_SUPPORT2")
        first = card(page, approval_id)
        await expect(first).to_contain_text("Approval needed: Refund USD 120.00")
        async with page.context.expect_page() as opened:
            await first.get_by_role("link", name="Open in browser").click()
        web_page = await opened.value
        await expect(web_page.locator("header .who")).to_have_text("Signed in as U_SUPPORT2")
        assert web_page.url == f"{sandbox.bot_url}/inbox/approvals/{approval_id}"
        await expect(web_page.locator("h1.heading")).to_contain_text("Refund USD 120.00")
        await web_page.locator("form.approve button").click()
        await expect(web_page.locator(".outcome")).to_be_visible()
        await expect(card(page, approval_id)).to_contain_text("Approved", timeout=15000)
    decided = await sandbox.rt.lifecycle.store.approvals.get(approval_id)
    assert [(d.reviewer, d.via) for d in decided.decisions] == [("U_SUPPORT2", "web")]


async def test_the_sandbox_is_usable_at_420_pixels(sandbox: Sandbox) -> None:
    """At a phone's width a card keeps room to be read (no one word per line) and nothing runs off the side."""
    await refund(sandbox, 120, "A note from the customer.")
    async with browser_page(420, 860) as page:
        failed: list[str] = []  # every request the page makes is answered (no favicon 404 either)
        page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        await page.goto(f"{sandbox.url}/?as=U_SUPPORT1")
        first = page.locator(".msg").first
        await expect(first).to_contain_text("Approval needed: Refund USD 120.00")

        async def readable() -> bool:  # laid out with room to read (the stylesheet may still be applying)
            box = await first.locator(".body").bounding_box()
            return box is not None and box["width"] >= 300

        await eventually(readable, what="the card's body to be at least 300 px wide at 420 px", timeout=10)
        wide = await page.evaluate("document.documentElement.scrollWidth")
        assert wide <= 420, wide  # no horizontal scrolling
        await expect(first.get_by_role("button", name="Approve")).to_be_visible()
        await shot(page, "9-narrow-420px")
        assert failed == []


async def test_a_channel_badge_counts_what_waits_and_goes_down_as_people_decide(sandbox: Sandbox) -> None:
    await refund(sandbox, 120, "A note from the customer.")
    async with browser_page() as page:
        await page.goto(f"{sandbox.url}/?as=U_SUPPORT1")
        badge = page.locator("#channels a", has_text="refund-approvals").locator(".count")
        await expect(badge).to_have_text("1")
        await page.locator(".msg").first.get_by_role("button", name="Approve").click()
        await expect(badge).to_have_count(0)  # decided: nothing waits there any more


def message_for(sb: Sandbox, approval_id: str):  # type: ignore[no-untyped-def]
    return next(m for m in sb.state.messages if approval_id in m.text and not m.thread_ts and not m.ephemeral_to)


async def test_the_home_tab_is_an_inbox_that_links_to_its_cards_and_keeps_up(sandbox: Sandbox) -> None:
    """The Home tab as a reviewer uses it: what waits for them, updated while they look at it when someone else
    decides; its link opens the card, where they decide; back home, it is under "Decided by you lately"."""
    from hitl.bot.views.controls import ACTION_APPROVE

    first = await refund(sandbox, 120, "A note from the customer.")
    second = await refund(sandbox, 60, "Only the mug broke.", order="78300")
    async with browser_page() as page:
        await page.goto(f"{sandbox.url}/?as=U_SUPPORT1")
        await page.click("#home-link")
        home = page.locator("#home")
        await expect(home).to_contain_text("2 approvals wait on you · the most important first")
        await expect(home).to_contain_text("Refund USD 120.00 to “C-1042” for order “78291”")
        await expect(page.locator("#channel-title")).to_have_text("Home")

        await sandbox.dispatcher.click("U_SUPPORT2", message_for(sandbox, second), ACTION_APPROVE)
        # Published again (nobody reopened the tab), within a tab's pace of one publish per 5 s.
        await expect(home).to_contain_text("1 approval waits on you", timeout=15000)

        await home.get_by_role("link", name="Open the card").click()
        opened = page.locator(".msg.highlight")
        await expect(opened).to_contain_text("Approval needed: Refund USD 120.00")
        await expect(opened).to_contain_text(first)
        await opened.get_by_role("button", name="Approve").click()
        await expect(card(page, first)).to_contain_text("Approved and done: Refund USD 120.00", timeout=15000)

        await page.click("#home-link")
        await expect(home).to_contain_text("Nothing is waiting for you")
        await expect(home).to_contain_text("Approved Refund USD 120.00 to “C-1042” for order “78291”")


DOCS_SHOTS = ROOT / "docs" / "pages" / "screenshots"


def _pixels(png: bytes) -> tuple[int, list[bytes]] | None:
    """A PNG's pixel rows, unfiltered (8-bit RGB or RGBA, not interlaced, as Chromium writes them), with the bytes
    per pixel; None for anything else."""
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", data[:8])
            channels = {2: 3, 6: 4}.get(data[9], 0)
            if data[8] != 8 or data[12] != 0 or not channels:
                return None
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw, stride, rows = zlib.decompress(idat), width * channels, []
    above = bytearray(stride)
    for y in range(height):
        kind_of_row, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):  # PNG's five row filters, undone (RFC 2083, 6.6)
            a, b = line[i - channels] if i >= channels else 0, above[i]
            c = above[i - channels] if i >= channels else 0
            if kind_of_row == 1:
                line[i] = (line[i] + a) & 255
            elif kind_of_row == 2:
                line[i] = (line[i] + b) & 255
            elif kind_of_row == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif kind_of_row == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        above = line
    return channels, rows


def _drawn_alike(old_png: bytes, new_png: bytes) -> bool:
    """Whether two screenshots differ by antialiasing alone: the same size, no pixel changed by 48 or more in a
    channel (text on the card's backgrounds changes by far more where a glyph, a line or a box moves), and at most
    1% of pixels changed at all. Measured: two runs of the faithful card differed in 45 pixels, each by less than
    32."""
    if old_png == new_png:
        return True
    old, new = _pixels(old_png), _pixels(new_png)
    if old is None or new is None or len(old[1]) != len(new[1]) or old[0] != new[0]:
        return False
    channels, changed = old[0], 0
    for a, b in zip(old[1], new[1], strict=True):
        if a == b:
            continue
        if len(a) != len(b):
            return False
        for x in range(0, len(a), channels):
            delta = max(abs(a[x + k] - b[x + k]) for k in range(3))
            if delta >= 48:
                return False
            changed += delta > 0
    return changed <= len(old[1]) * len(old[1][0]) // channels // 100


UPDATE_SHOTS = os.environ.get("HITL_UPDATE_SCREENSHOTS") == "1"
"""Rewrite the docs' screenshots that no longer match (after a change that is meant to show)."""


def keep_or_write(shot: Path, fresh: bytes, words: str) -> None:
    """A docs screenshot must still be what the browser draws, or the test fails (``HITL_UPDATE_SCREENSHOTS=1``
    rewrites it). Its words are compared exactly: ``words`` (the element's text as the browser lays it out) against
    the ``.txt`` kept beside the image, so no changed value, label or line can hide. Its pixels are compared with a
    tolerance for Chromium's antialiasing, which differs slightly from run to run (:func:`_drawn_alike`): a change
    of layout, style or font moves glyphs and boxes, which changes pixels by far more."""
    text = shot.with_suffix(".txt")
    same_words = text.exists() and text.read_text() == words
    same_pixels = shot.exists() and _drawn_alike(shot.read_bytes(), fresh)
    if same_words and same_pixels:
        return
    if UPDATE_SHOTS:
        shot.write_bytes(fresh)
        text.write_text(words)
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    (SHOTS / shot.name).write_bytes(fresh)
    (SHOTS / text.name).write_text(words)
    what = "its words differ" if not same_words else "its pixels differ beyond antialiasing"
    pytest.fail(
        f"{shot.relative_to(ROOT)} is no longer what the browser draws ({what}); the new one is "
        f"artifacts/screenshots/{shot.name}. If the change is meant: HITL_UPDATE_SCREENSHOTS=1 make test"
    )


async def steady_shot(page: Page, sb: Sandbox, found: Any, name: str) -> None:
    """Write the docs screenshot ``name`` of ``found`` once the page shows the sandbox's last change (the page
    redraws on every change), with no hover highlight: the same picture every run."""

    async def taken() -> bool:
        if await page.evaluate("document.body.dataset.version") != str(sb.page.version):
            return False
        await page.mouse.move(1, 1)
        try:
            keep_or_write(DOCS_SHOTS / f"{name}.png", await found.screenshot(timeout=2000), await found.inner_text())
        except PlaywrightError:
            return False
        return True

    await eventually(taken, what=f"a steady screenshot of {name}", timeout=15)


async def docs_sandbox(tmp_path: Path, config: str | Path, clock: FakeClock) -> Sandbox:
    """The sandbox for a docs screenshot: serving ``config`` (hitl.yaml's text, written to ``tmp_path``, or a path)
    on a SQLite store in ``tmp_path``, it and its Slack stand-in on ``clock`` (fixed, so the times the pictures show
    are the same on every run)."""
    if isinstance(config, str):
        (tmp_path / "hitl.yaml").write_text(config)
        config = tmp_path / "hitl.yaml"
    sb = await start_sandbox(config_path=config, store=SqliteStore(tmp_path / "hitl.db"), clock=clock)
    sb.state.clock = clock.now
    return sb


async def test_the_docs_show_every_card_state_as_the_browser_draws_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The screenshots in the docs (docs/pages/screenshots) are taken here, on every run, so they never go stale:
    each card state a reviewer meets, and the Home tab. A fixed clock keeps their times the same from run to run."""
    from hitl.demo.scenario import TRUST_SESSION
    from hitl.engine.domain.requests import ProposeRequest
    from hitl.testing import FakeClock, make_approval

    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    clock = FakeClock()
    sb = await docs_sandbox(tmp_path, refund_example() / "hitl.yaml", clock)
    svc = sb.rt.runtime.contexts.default.service
    try:
        # Fixed sessions as well as a fixed clock: the same ids every run, so the pictures change only with the code.
        pending = await refund(sb, 120, HOSTILE_NOTE, session="ses_DOCS000001")
        edited = await refund(sb, 60, "Only the mug broke.", order="78300", session="ses_DOCS000002")
        rejected = await refund(sb, 20, "Changed my mind.", order="78292", session="ses_DOCS000003")
        expired = await refund(sb, 49, "Please hurry.", order="78292", session="ses_DOCS000004")
        args = {"order_id": "78310", "customer_id": "C-3107", "amount": 25, "reason": "late delivery"}
        trusted = await svc.propose(ProposeRequest("refund", args, session_id=TRUST_SESSION, requester="agent:chat"))
        doubt = make_approval(
            now=clock.now(),
            tool="doubt:refund",
            session_id="ses_doubt",
            args={"tool": "refund", "args": {"order_id": "78320", "amount": 80}},
        ).model_copy(update={"kind": ApprovalKind.DOUBT})
        await sb.rt.store.approvals.create(doubt)
        async with browser_page() as page:
            await page.goto(f"{sb.url}/?as=U_SUPPORT1")
            DOCS_SHOTS.mkdir(parents=True, exist_ok=True)

            async def snap(approval_id: str, name: str, text: str) -> None:
                found = card(page, approval_id)
                await expect(found).to_contain_text(text, timeout=15000)
                await sb.rt.ctx.notifier.flush()
                await sb.rt.ctx.home.settled()
                await tells_its_view(sb, found, approval_id)
                await steady_shot(page, sb, found, name)

            await snap(doubt.id, "card-in-doubt", "Did it happen? refund")
            await snap(pending, "card-pending", "Approval needed: Refund USD 120.00")
            # The README's and the docs home's picture: the sandbox as `make demo` opens it, a card waiting.
            hero = page.locator("#messages")
            keep_or_write(ROOT / "docs" / "pages" / "sandbox.png", await page.screenshot(), await hero.inner_text())

            await card(page, edited).get_by_role("button", name="Modify").click()
            await page.locator(".modal input[name='hitl_field:amount']").fill("900")
            await page.click("#modal-submit")
            await snap(edited, "card-superseded", "Superseded: Refund USD 60.00")

            await card(page, rejected).get_by_role("button", name="Reject").click()
            await page.click("#confirm-ok")
            await page.locator(".modal textarea").fill("Customer withdrew the request")
            await page.click("#modal-submit")
            await snap(rejected, "card-rejected", "Rejected: Refund USD 20.00")

            assert trusted.approval is not None
            await card(page, trusted.approval.id).get_by_role("button", name="Trust for session").click()
            await expect(page.locator(".modal")).to_contain_text(
                "For agent:chat only: approves this call, and lets its later refund calls in session chat-42"
            )
            await page.click("#confirm-ok")
            await snap(trusted.approval.id, "card-trusted", "until 2027-01-15 09:00 UTC")

            await page.click("#home-link")
            home = page.locator("#home")
            await expect(home).to_contain_text("runs without review until")  # the trust in force
            await expect(home).to_contain_text("Did it happen? refund")
            await expect(home).to_contain_text("Rejected Refund USD 20.00")
            await sb.rt.ctx.home.settled()
            keep_or_write(DOCS_SHOTS / "home-tab.png", await page.screenshot(), await home.inner_text())

            await page.get_by_text("# refund-approvals").click()
            # `/hitl pending`: a count, then two lines per approval (issue 63), not a wall of cards.
            await page.fill("#composer-input", "/hitl pending")
            await page.press("#composer-input", "Enter")
            listed = page.locator(".msg.ephemeral")
            await expect(listed).to_contain_text("3 approvals wait on you, the most important first")
            await steady_shot(page, sb, listed, "hitl-pending")

            clock.advance(5 * 3600)
            await svc.expire_due()
            await snap(expired, "card-expired", "Expired: Refund USD 49.00")
    finally:
        await sb.close()


async def tells_its_view(sb: Sandbox, found: Any, approval_id: str) -> None:
    """The card as the browser draws it tells the approval's one view: its heading, each argument's label and
    value as shown, the reasons, the outcome line (the sandbox as a surface of issue 45's story test)."""
    a = await sb.rt.store.approvals.get(approval_id)
    view = (await sb.rt.lifecycle.context_of(a)).config.present(a)
    drawn = await found.evaluate(
        """(el) => {
            const args = el.querySelector(".b-rich");
            return {
                heading: el.querySelector(".b-header").innerText,
                labels: [...args.querySelectorAll(".b-rich-line")].map((l) => l.innerText),
                values: [...args.querySelectorAll("pre.code")].map((p) => p.textContent),
                text: el.innerText,
            };
        }"""
    )
    assert drawn["heading"] == ("⚠ " if view.look_closely else "") + view.heading  # issue 63: marked where seen
    assert drawn["values"][: len(view.fields)] == [f.value.text for f in view.fields]
    assert all(f.label in line for f, line in zip(view.fields, drawn["labels"], strict=False)), drawn["labels"]
    assert all(reason in drawn["text"] for reason in view.reasons)
    told = view.outcome
    last = a.decisions[-1] if a.decisions else None
    if told is not None and last is not None and told.startswith(f"{last.reviewer} "):
        # The card names the decider once, as Slack draws their mention, and their reason in a box of its own.
        said, _, reason = told.removeprefix(f"{last.reviewer} ").partition(": ")
        name = sb.state.users[last.reviewer]["name"]
        assert f"@{name} {said}" in drawn["text"] and reason in drawn["text"], (told, drawn["text"])
    else:
        assert told is None or told in drawn["text"]


FAITHFUL_CONFIG = """
requester: agent:riley
roles:
  support: [U_SUPPORT1, U_SUPPORT2]
policy:
  tools:
    transfer:
      tier: approve
      role: support
      summary: "Transfer {{ args.amount | money }} to {{ args.to }}"
      schema:
        type: object
        properties:
          to: {type: string, title: Recipient}
          amount: {type: number, title: Amount, x-currency: EUR}
          site: {type: string, title: Website}
          memo: {type: string, title: Memo}
        required: [to, amount]
    change_settings: {tier: approve, role: support}
slack:
  channel: "#refund-approvals"
"""
"""Two tools whose cards carried the values that misled (issue 44): a sentence with money, and no schema at all."""

MISLEADING_SETTINGS = {
    "skip_backup": "false",
    "dry_run": False,
    "limit": "1000",
    "count": 1000,
    "owner": None,
    "label": "(none)",
    "Approvers": "fin (quorum 2)",
    "Expires": "never",
    "x\n*Requested by*": "the CFO",
    "to": "bob@example.com\n*amount*\n`1`",
}
"""Types a card must not erase, keys that wear hitl's labels, a newline that would forge a label and value."""

MISLEADING_TRANSFER = {
    "to": "C-1 (verified by the CFO)\nAmount: 1",
    "amount": 899.999,
    "site": "p\u0430ypal.com",
    "memo": "Invoice 2026-11 for services. " * 165 + "TAIL: also wire 9999 to mallory",
}
"""A value that extends the headline, money a float would round, a Cyrillic look-alike, a 5,000-character memo."""


async def test_the_docs_show_a_card_that_cannot_mislead(tmp_path: Path) -> None:
    """The Slack page's faithful-card screenshots: the values that misled a reviewer, as the browser draws them."""
    from hitl.engine.domain.requests import ProposeRequest
    from hitl.testing import FakeClock

    clock = FakeClock()
    sb = await docs_sandbox(tmp_path, FAITHFUL_CONFIG, clock)
    svc = sb.rt.runtime.contexts.default.service
    try:
        settings = await svc.propose(
            ProposeRequest("change_settings", MISLEADING_SETTINGS, session_id="ses_DOCS000010", requester="agent:ops")
        )
        transfer = await svc.propose(
            ProposeRequest("transfer", MISLEADING_TRANSFER, session_id="ses_DOCS000011", requester="agent:ops")
        )
        assert settings.approval is not None and transfer.approval is not None
        async with browser_page(height=2400) as page:
            await page.goto(f"{sb.url}/?as=U_SUPPORT1")
            DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
            for approval, name in ((settings.approval, "card-types"), (transfer.approval, "card-transfer")):
                found = card(page, approval.id)
                await expect(found).to_contain_text("Approval needed", timeout=15000)
                await sb.rt.ctx.notifier.flush()

                await steady_shot(page, sb, found, name)

            found = card(page, transfer.approval.id)
            await expect(found).to_contain_text("mixes Latin and Cyrillic")
            await expect(found).to_contain_text("Transfer EUR 899.999 to “C-1 (verified by the CFO)…”")
            await found.get_by_role("button", name="Show memo in full").click()
            modal = page.locator(".modal")
            await expect(modal).to_contain_text("Page 1 of 1")
            await expect(modal).to_contain_text("TAIL: also wire 9999 to mallory")
            keep_or_write(DOCS_SHOTS / "card-full-value.png", await modal.screenshot(), await modal.inner_text())
    finally:
        await sb.close()


ATTENTION_CONFIG = """
requester: agent:riley
roles:
  finance: [U_SUPPORT1, U_SUPPORT2]
policy:
  tools:
    pay:
      tier: approve
      summary: "Pay {{ args.amount | money }} to {{ args.to }}"
      schema:
        type: object
        properties:
          to: {type: string, title: Payee}
          amount: {type: number, title: Amount, x-currency: EUR}
        required: [to, amount]
  tiers:
    escalate: {confirm: [amount], approve_reason: required}
  rules:
    - {name: large_payment, tools: [pay], when: "args.amount > 500", tier: escalate,
       reason: "Payments over 500 are escalated."}
slack:
  channel: "#refund-approvals"
"""


async def test_the_docs_show_the_form_an_escalated_approval_asks_for(tmp_path: Path) -> None:
    """The Slack page's confirmation form: an escalated payment's Approve opens a form where the reviewer types the
    amount and says why; a wrong amount is refused in the form, the right one approves."""
    from hitl.engine.domain.requests import ProposeRequest
    from hitl.testing import FakeClock

    clock = FakeClock()
    sb = await docs_sandbox(tmp_path, ATTENTION_CONFIG, clock)
    svc = sb.rt.runtime.contexts.default.service
    try:
        args = {"to": "Northwind Ltd", "amount": 4820.5}
        paid = await svc.propose(ProposeRequest("pay", args, session_id="ses_DOCS000020"))
        assert paid.approval is not None and paid.approval.confirm == ("amount",)
        async with browser_page() as page:
            await page.goto(f"{sb.url}/?as=U_SUPPORT1")
            found = card(page, paid.approval.id)
            await expect(found).to_contain_text("Approval needed", timeout=15000)
            await found.get_by_role("button", name="Approve…").click()
            modal = page.locator(".modal")
            await expect(modal).to_contain_text("Type the amount that runs")
            await expect(modal).to_contain_text("Why approve it?")
            await expect(modal).to_contain_text("Approval needed: Pay EUR 4,820.50 to")  # the card's headline again
            await expect(modal).to_contain_text("number, EUR")  # and the marks of what it asks for
            DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
            keep_or_write(DOCS_SHOTS / "confirm-form.png", await modal.screenshot(), await modal.inner_text())

            # Two wrong fields: each told at once, under its own input, in a reviewer's words.
            await modal.locator("input[name='hitl_confirm:amount']").fill("4820")
            await page.click("#modal-submit")
            await expect(modal.locator(".field.invalid")).to_have_count(2)
            await expect(modal.locator(".field.invalid .error").first).to_contain_text("not the amount that runs")
            await expect(modal.locator(".field.invalid .error").last).to_contain_text(
                "A reason is needed to approve this pay request"
            )
            keep_or_write(DOCS_SHOTS / "confirm-form-errors.png", await modal.screenshot(), await modal.inner_text())

            await modal.locator("input[name='hitl_confirm:amount']").fill("4820")
            await modal.locator("textarea").fill("Invoice INV-2211 matches the contract")
            await page.click("#modal-submit")
            await expect(modal.locator(".field.invalid")).to_have_count(1)  # the reason is given now
            await expect(modal.locator(".field.invalid .error")).to_contain_text("not the amount that runs")
            assert (await sb.rt.store.approvals.get(paid.approval.id)).is_open
            await modal.locator("input[name='hitl_confirm:amount']").fill("4,820.50")
            await page.click("#modal-submit")
            await expect(found).to_contain_text("Approved", timeout=15000)
    finally:
        await sb.close()


async def test_the_docs_show_a_flood_as_one_group_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Slack page's group card: twelve refunds one agent session asked for together, on one card, decided
    together from the browser (Approve all, through Slack's confirmation) and one by one (Open)."""
    from hitl.engine.domain.requests import ProposeRequest
    from hitl.engine.runtime.compose import compose
    from hitl.testing import FakeClock

    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    clock = FakeClock()
    config = refund_example() / "hitl.yaml"
    agent_store = SqliteStore(tmp_path / "hitl.db")  # an agent process, before the sandbox: twelve at once
    try:
        agent = compose(store=agent_store, clock=clock, config_path=str(config)).service
        for i in range(12):
            args = {"order_id": f"{78400 + i}", "customer_id": f"C-{2100 + i}", "amount": 15 + 5 * i}
            p = await agent.propose(
                ProposeRequest("refund", args, session_id="ses_DOCS000020", requester="agent:riley")
            )
            assert p.approval is not None
            clock.advance(1)  # one a second: the card lists them oldest first
    finally:
        await agent_store.close()
    sb = await docs_sandbox(tmp_path, config, clock)
    try:
        await sb.rt.ctx.notifier.sweep()  # what queued together goes on one card
        async with browser_page(height=1400) as page:
            await page.goto(f"{sb.url}/?as=U_SUPPORT1")
            [posted] = [m for m in sb.state.messages if " × refund" in m.text]
            found = page.locator(f".msg[data-ts='{posted.ts}']")
            await expect(found).to_contain_text("total 510 USD over 12", timeout=15000)
            await expect(found).to_contain_text("…and 7 more")
            await sb.rt.ctx.notifier.flush()
            await sb.rt.ctx.home.settled()
            await steady_shot(page, sb, found, "card-group")

            await found.get_by_role("button", name="Open").first.click()  # one member's own card, for me alone
            mine = page.locator(".msg.ephemeral", has_text="Approval needed: Refund USD 15.00").first
            await expect(mine).to_contain_text("Only visible to you", timeout=15000)
            await mine.get_by_role("button", name="Approve").first.click()
            await expect(found).to_contain_text("Approval needed: 11 × refund", timeout=15000)

            await found.get_by_role("button", name="Approve all 11").click()
            await expect(page.locator(".modal")).to_contain_text("Approve all 11?")
            await page.click("#confirm-ok")
            await expect(found).to_contain_text("12 × refund: 12 approved", timeout=15000)
            await expect(found).to_contain_text("12 approved")
            # Who decided, when, and each member with how it ended and its Open: no control decides any more.
            await expect(found).to_contain_text("@support1 approved 12 · ")
            await expect(found).to_contain_text("12 refunds from agent:riley")
            await expect(found.get_by_role("button", name="Open")).to_have_count(12)
            await expect(found.get_by_role("button")).to_have_count(12)
            await sb.rt.ctx.notifier.flush()
            await steady_shot(page, sb, found, "card-group-decided")
    finally:
        await sb.close()


@pytest.mark.slow
async def test_every_code_block_of_the_docs_reads_whole_at_1280_pixels(site: Path) -> None:
    """Each page of the built site in Chromium at 1280 px: no code block runs under the page's edge (a long line
    wraps), so nothing a reader copies from a block was out of sight."""
    pages = sorted(site.glob("*/index.html")) + [site / "index.html"]
    checked = 0
    async with browser_page(1280, 900) as page:
        for html in pages:
            await page.goto(html.as_uri())
            hidden = await page.evaluate(
                """() => [...document.querySelectorAll(".md-typeset pre > code")]
                    .filter((p) => p.scrollWidth > p.clientWidth + 1)
                    .map((p) => p.textContent.split("\\n").reduce((a, b) => (b.length > a.length ? b : a)))"""
            )
            assert hidden == [], f"{html.parent.name}: a block runs under the edge: {hidden}"
            checked += await page.evaluate("document.querySelectorAll('.md-typeset pre > code').length")
    assert checked > 30
