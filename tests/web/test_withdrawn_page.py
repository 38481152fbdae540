"""The decision page of an approval whose go was withdrawn, over HTTP through a real `hitl serve` and a real OpenID
Connect sign-in: it says who withdrew it, when, through what and why (the reason drawn inert, its look-alike letters
and hidden characters marked as an argument's are), and offers no form to decide it."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape
from pathlib import Path

from hitl.api import token_hash
from hitl.engine.storage import open_store
from hitl.receipts.signing import new_key_pem
from tests.web.conftest import browser, serving, sign_in
from tests.web.test_decision_page import paused_refund
from tests.web.test_page_decisions import approval, form_of, page_of, post

SUPPORT1 = "tok-support1-web"
REASON = "<b>Refund</b> went to pаypal-support\u202e instead\nsecond line"
"""Markup, a look-alike (a Cyrillic а in a Latin word), a direction-changing control and a line break."""


def _with_receipts(text: str) -> str:
    """The refund example's hitl.yaml issuing receipts for its refunds, and U_SUPPORT1's API token."""
    return text + (
        "\nreceipts:\n  issuer: https://hitl.example.com\n  key_file: receipt.pem\n  tools:\n"
        "    refund: {audience: shop}\n"
        f"api:\n  tokens:\n    - {{name: support1, sha256: {token_hash(SUPPORT1)}, reviewer: U_SUPPORT1, "
        "scopes: [read, decide]}\n"
    )


async def test_the_page_of_a_withdrawn_approval_says_who_when_and_why_and_offers_no_decision(tmp_path: Path) -> None:
    (tmp_path / "receipt.pem").write_bytes(new_key_pem())
    async with serving(tmp_path, edit=_with_receipts) as inbox, browser() as http:
        approval_id = await paused_refund(inbox, 20)
        await sign_in(http, inbox, "U_SUPPORT1")
        approve = form_of(await page_of(http, inbox, approval_id), "approve")
        assert (await post(http, inbox, approval_id, approve))[0] == 303
        before = await page_of(http, inbox, approval_id)
        assert 'class="withdrawn"' not in before

        url = f"{inbox.url}/api/v1/approvals/{approval_id}/withdrawal"
        headers = {"Authorization": f"Bearer {SUPPORT1}"}
        async with http.post(url, json={"reason": REASON}, headers=headers) as r:
            assert r.status == 200, await r.text()
        page = await page_of(http, inbox, approval_id)

    store = open_store(inbox.env["HITL_STORE"])
    try:
        [entry] = [e for e in await store.audit.entries(approval_id=approval_id) if e.event == "withdrawn"]
    finally:
        await store.close()
    assert (await approval(inbox, approval_id)).status.value in ("approved", "executing", "executed", "failed")
    at = datetime.fromtimestamp(entry.at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert f"<b>Withdrawn</b> by <b>U_SUPPORT1</b> (api:support1) at {at}" in page
    shown = escape("<b>Refund</b> went to pаypal-support[U+202E] instead\nsecond line")
    assert f'<pre class="value">\n{shown}</pre>' in page  # inert: escaped, the control marked where it was
    assert "<b>Refund</b>" not in page.split('class="withdrawn"')[1] and "\u202e" not in page
    assert escape("mixes Latin and Cyrillic: а (U+0430, Cyrillic) at character 2; reads like “paypal-support”") in page
    assert "1 invisible, control or direction-changing character" in page
    assert 'class="decide' not in page and "<form" not in page.split("</header>")[1]  # nothing to decide
