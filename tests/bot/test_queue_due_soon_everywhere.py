"""Issue 63 item 4: an approval due soon ranks first on every list whatever page the store's rank would put it on.
More than a page of escalations with hours left, and one payment due soon (asked first, or asked last with a short
timeout), meet a reviewer on ``/hitl pending`` over signed Slack requests, on the Home tab over the Events API and
on the HTTP API's default order: the payment first, saying why, and listed once across the pages. On every
store."""

from __future__ import annotations

from typing import Any

from hitl.bot.listeners.commands import ACTION_PENDING_PAGE
from hitl.bot.views.home import HOME_WAITING, SHOWN
from hitl.engine.domain.requests import ProposeRequest
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

TOKEN = "tok-pay-1"
WIRE_SUMMARY = '"Wire {{ args.amount | money }} to {{ args.to }}"'
TIP_SUMMARY = '"Tip {{ args.amount | money }} to {{ args.to }}"'
CONFIG = (
    payments.requested_by_riley(payments="[U_SUPPORT1, U_SUPPORT2]")
    + payments.tool("wire", tier="escalate", role="payments", timeout="3h", summary=WIRE_SUMMARY)
    + payments.tool("tip", tier="approve", role="payments", timeout="8m", summary=TIP_SUMMARY)
    + payments.tool("pay", tier="approve", role="payments", timeout="1h", summary=payments.PAY_SUMMARY)
    + payments.api_tokens(token("pay1", TOKEN, "U_SUPPORT1"))
)

WIRES = SHOWN + 2
"""More escalations than any first page holds: the Home tab's, ``/hitl pending``'s (8) and the API's (5 asked)."""

h = harness_serving(CONFIG)


async def _wires(h: Harness) -> list[str]:
    ids = []
    for i in range(WIRES):
        args = {"to": f"V-{i}", "amount": 900 + i}
        p = await h.svc.propose(ProposeRequest("wire", args, session_id=f"ses_wire{i}"))
        assert p.approval is not None
        ids.append(str(p.approval.id))
        h.clock.advance(1)
    await h.settle()
    return ids


async def _pending_pages(h: Harness) -> list[list[str]]:
    """Every page of ``/hitl pending`` for U_SUPPORT1, following its "Next page" button: each page's lines."""
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    pages = []
    while True:
        reply = h.ephemeral("U_SUPPORT1")[-1]
        pages.append(
            [b["text"]["text"] for b in reply.blocks if str(b.get("block_id", "")).startswith("hitl_pending:")]
        )
        if not any(b.get("block_id") == "hitl_pending_more" for b in reply.blocks):
            return pages
        assert (await h.slack.click("U_SUPPORT1", reply, ACTION_PENDING_PAGE)).status == 200


async def _api(h: Harness, query: str) -> Any:
    async with h.http.get(f"{h.bot_url}/api/v1/approvals?{query}", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def _every_list_puts_it_first(h: Harness, urgent: str, sentence: str, why: str, wires: list[str]) -> None:
    pages = await _pending_pages(h)
    lines = [line for page in pages for line in page]
    assert len(pages) >= 3 and lines[0].startswith(f"*{sentence}*\n") and why in lines[0], pages[0][:2]
    assert sum(sentence in line for line in lines) == 1  # once, though the store ranks it on its last page
    assert len(lines) == WIRES + 1 and all("Wire" in line for line in lines[1:])

    assert (await h.slack.home_opened("U_SUPPORT1")).status == 200
    await h.rt.ctx.home.settled()
    home = h.state.homes["U_SUPPORT1"]["blocks"]
    waiting = [b["text"]["text"] for b in home if str(b.get("block_id", "")).startswith(HOME_WAITING)]
    assert waiting[0].split("*")[1] == sentence and why in waiting[0] and len(waiting) == SHOWN

    first = await _api(h, "limit=5")
    assert [a["id"] for a in first["items"]] == [urgent, *wires[:4]]
    assert first["items"][0]["ranked"].startswith(why) and first["items"][1]["ranked"].startswith("escalated · ")
    seen, cursor = [a["id"] for a in first["items"]], first["cursor"]
    while cursor:
        page = await _api(h, f"limit=5&cursor={cursor}")
        seen += [a["id"] for a in page["items"]]
        cursor = page["cursor"]
    assert seen == [urgent, *wires]  # each once, the rest in rank order


async def test_one_asked_first_and_now_due_soon_leads_every_list_over_pages_of_escalations(h: Harness) -> None:
    urgent = (await pay(h, 40, "V-40")).id
    h.clock.advance(59 * 60 - WIRES)  # the payment has 1 min left once the escalations are asked
    wires = await _wires(h)
    await _every_list_puts_it_first(h, urgent, "Pay USD 40.00 to “V-40”", "due soon, so first: 1 min left", wires)


async def test_one_asked_last_with_a_short_timeout_leads_every_list_over_pages_of_escalations(h: Harness) -> None:
    wires = await _wires(h)
    p = await h.svc.propose(ProposeRequest("tip", {"to": "V-7", "amount": 7}, session_id="ses_tip"))
    assert p.approval is not None
    await h.settle()
    await _every_list_puts_it_first(h, p.approval.id, "Tip USD 7.00 to “V-7”", "due soon, so first: 8 min left", wires)
