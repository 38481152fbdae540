"""The e-mail channel end to end through a real `hitl serve`: a real SMTP server (aiosmtpd) receives one message per
support reviewer; the link in it is a pointer (a scanner's GET or HEAD decides nothing and is sent to sign in); headless
Chromium follows it from the received message, signs in at the real OpenID Connect provider and approves; the run
resumes once; the same link, opened after, says who decided and offers nothing to decide."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
from playwright.async_api import expect

from hitl.engine.domain.models import Status
from tests.mail.smtp_server import Mailbox, smtp_server
from tests.sandbox.test_browser import browser_page
from tests.waiting import eventually
from tests.web.conftest import Inbox, browser, executed_with_trail, refunds, serving, sign_in
from tests.web.test_decision_page import card_of, paused_refund, sign_in_at_provider, stored

NOTE = "Approve this now.\r\nBcc: attacker@evil.example\n<img src=https://evil.example/pixel.png>"


def with_email(port: int, details: str = "full") -> str:
    return (
        f"email: {{smtp_url: 'smtp://127.0.0.1:{port}', from: hitl@example.com, details: {details}, "
        "tools: [refund], pace: 0}\n"
        "contacts:\n  U_SUPPORT1: {email: s1@example.com}\n  U_SUPPORT2: {email: s2@example.com}\n"
        "  U_FIN1: {email: f1@example.com}\n"
    )


async def test_the_mailed_link_brings_a_reviewer_to_sign_in_and_decide_once(tmp_path: Path) -> None:
    with smtp_server() as box:
        async with serving(tmp_path, edit=lambda text: text + with_email(box.port)) as inbox:
            await follow_the_link(inbox, box)


async def follow_the_link(inbox: Inbox, box: Mailbox) -> None:
    approval_id = await paused_refund(inbox, 75, note=NOTE)
    await eventually(lambda: len(box.received) >= 2, what="hitl serve to mail both support reviewers")
    assert sorted(r.recipients for r in box.received) == [("s1@example.com",), ("s2@example.com",)]  # not finance
    got = box.to("s1@example.com")[0]
    assert got.message["Bcc"] is None and got.message.get_all("To") == ["s1@example.com"]
    link = f"{inbox.url}/inbox/approvals/{approval_id}"
    plain, html = got.part("plain"), got.part("html")
    assert re.findall(r"https?://[^\s<>\"]+", plain) == [link]  # the evidence's address defanged, no token
    assert f"Check that the link goes to 127.0.0.1:{inbox.url.rsplit(':', 1)[1]}" in plain
    assert "Approve this now." in plain and "<img" not in html

    async with aiohttp.ClientSession() as scanner:  # a link scanner or a preview: it reaches sign-in, nothing more
        for method in ("GET", "HEAD"):
            async with scanner.request(method, link, allow_redirects=False) as r:
                assert r.status in (302, 303) and r.headers["Referrer-Policy"] == "no-referrer"
    assert (await stored(inbox, approval_id)).status is Status.PENDING

    async with browser_page() as page:
        await page.goto(link)
        assert page.url.startswith(inbox.issuer)  # signed out: to the provider first
        await sign_in_at_provider(page, "U_SUPPORT1")
        await expect(page.locator("form.approve")).to_have_count(1)
        assert page.url == link
        answer = await page.reload()
        assert answer is not None and answer.headers["referrer-policy"] == "no-referrer"
        await page.locator("form.approve").get_by_role("button", name="Approve").click()
        await expect(page.locator(".outcome")).to_contain_text("U_SUPPORT1 approved")
        delivered = page.locator("section.delivery li")
        await expect(delivered).to_have_count(6)  # its card queued and posted, its e-mail queued and sent to each
        lines = await delivered.all_inner_texts()
        # The card and the e-mails go out on their own tasks, so only each channel's order is fixed:
        # every delivery is recorded as queued before it is attempted.
        posted = [i for i, line in enumerate(lines) if line.startswith("Slack card posted in C")]
        assert len(posted) == 1 and lines.index("Slack card queued in #refund-approvals") < posted[0]
        for person in ("U_SUPPORT1", "U_SUPPORT2"):
            sent = [i for i, line in enumerate(lines) if line.startswith(f"e-mail sent to {person}")]
            assert len(sent) == 1 and lines.index(f"e-mail queued to {person}") < sent[0]

    assert await eventually(lambda: refunds(inbox), what="the run to resume and refund") == [(75.0,)]
    async with browser() as http:  # the other addressee's link, opened after: who decided, nothing to decide
        await sign_in(http, inbox, "U_SUPPORT2", path=f"/inbox/approvals/{approval_id}")
        async with http.get(link) as r:
            page_text = await r.text()
        assert r.status == 200 and "U_SUPPORT1 approved" in page_text and "form.decide" not in page_text
        assert 'class="decide' not in page_text
        assert "Already decided by U_SUPPORT1 (web)" in page_text  # who, and on which channel

    def closed() -> bool:  # a decision by the mailed link closes the Slack card as one on the card would
        card = card_of(inbox, approval_id)
        return card is not None and card.blocks[0]["text"]["text"].removeprefix("⚠ ").startswith("Approved")

    await eventually(closed, what="the Slack card updated after the decision by e-mail link")
    card = card_of(inbox, approval_id)
    assert card is not None and not any(b.get("block_id", "").startswith("hitl_actions") for b in card.blocks)
    approval, trail = await executed_with_trail(inbox, approval_id)
    mail = [(e.event, e.detail.split(":")[0]) for e in trail]
    assert [e.actor for e in trail if e.event == "opened"] == ["U_SUPPORT1"]  # not U_SUPPORT2, after the decision
    assert approval.status is Status.EXECUTED and [(d.reviewer, d.via) for d in approval.decisions] == [
        ("U_SUPPORT1", "web")
    ]
    assert [m for m in mail if m[0] == "opened"] == [("opened", "")]  # once: the page reached U_SUPPORT1
    assert sorted(m for m in mail if m[0].startswith("mail_")) == [
        ("mail_queued", "to U_SUPPORT1"),
        ("mail_queued", "to U_SUPPORT2"),
        ("mail_sent", "to U_SUPPORT1"),
        ("mail_sent", "to U_SUPPORT2"),
    ]
    assert refunds(inbox) == [(75.0,)]  # once
    assert len(box.received) == 2  # and no message after the decision
    async with aiohttp.ClientSession() as http, http.get(f"{inbox.url}/metrics") as r:
        assert 'hitl_mail_messages_total{kind="message",outcome="sent"} 2.0' in await r.text()
