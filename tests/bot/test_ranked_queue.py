"""The queue a reviewer meets is ranked: an escalated payment of 5,000 proposed after payments of 5, 40 and 7 comes
first on every list of what they may decide (``/hitl pending`` over signed Slack requests, the Home tab, the HTTP
API's default order), each item says why it ranks there, and each reviewer sees how much waits on them. The API
keeps ``order=age``. On every store."""

from __future__ import annotations

import json
from typing import Any

from hitl.bot.views.home import HOME_WAITING
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

TOKEN = "tok-pay-1"
CONFIG = (
    payments.requested_by_riley(payments="[U_SUPPORT1, U_SUPPORT2]")
    + payments.tool("pay", tier="approve", timeout="1h", summary=payments.PAY_SUMMARY)
    + payments.LARGE_PAYMENTS_ESCALATE
    + payments.api_tokens(token("pay1", TOKEN, "U_SUPPORT1"), token("agent", "tok-agent", "agent:riley", "[read]"))
)

h = harness_serving(CONFIG)


async def _pay(h: Harness, amount: int, to: str) -> str:
    proposed = await pay(h, amount, to)
    h.clock.advance(1)
    return proposed.id


async def _api(h: Harness, query: str, token: str = TOKEN) -> Any:
    async with h.http.get(f"{h.bot_url}/api/v1/approvals?{query}", headers={"Authorization": f"Bearer {token}"}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def _order(text: str, ids: list[str]) -> list[str]:
    """``ids`` in the order ``text`` first names them (each must be there)."""
    assert all(i in text for i in ids), text
    return sorted(ids, key=text.index)


async def test_the_most_important_comes_first_on_every_list(h: Harness) -> None:
    small = [await _pay(h, 5, "V-5"), await _pay(h, 40, "V-40"), await _pay(h, 7, "V-7")]
    huge = await _pay(h, 5000, "V-5000")  # ten times the rule's limit
    over = await _pay(h, 600, "V-600")  # just over it
    ranked = [huge, over, *small]  # escalations by how far over, then the rest by deadline (oldest first here)
    await h.settle()

    # /hitl pending, a signed slash command: ranked, each with why, and how much waits in all.
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    page = json.dumps(h.ephemeral("U_SUPPORT1")[-1].blocks, ensure_ascii=False)
    assert _order(page, ranked) == ranked
    assert "5 approvals wait on you" in page
    # Issue 63: each tier wears its own icon beside its word (no longer the same :arrow_up_small: for all).
    assert ":rotating_light: escalated · 10× its rule's limit · 59 min left" in page
    assert ":rotating_light: escalated · 1.2× its rule's limit" in page and ":ballot_box_with_check: approve · " in page

    # The Home tab, opened over the signed Events API path.
    assert (await h.slack.home_opened("U_SUPPORT1")).status == 200
    await h.rt.ctx.home.settled()
    home = h.state.homes["U_SUPPORT1"]["blocks"]
    waiting = [b["text"]["text"] for b in home if str(b.get("block_id", "")).startswith(HOME_WAITING)]
    assert [w.split("*")[1] for w in waiting] == [
        "Pay USD 5,000.00 to “V-5000”",
        "Pay USD 600.00 to “V-600”",
        "Pay USD 5.00 to “V-5”",
        "Pay USD 40.00 to “V-40”",
        "Pay USD 7.00 to “V-7”",
    ]
    assert ":rotating_light: escalated · 10× its rule's limit" in waiting[0]
    assert "5 approvals wait on you · the most important first" in json.dumps(home, ensure_ascii=False)

    # The API: rank by default (each says why, the caller's count), paged exactly; order=age as before.
    body = await _api(h, "limit=2")
    assert [a["id"] for a in body["items"]] == ranked[:2] and body["waiting"] == 5
    assert body["items"][0]["ranked"].startswith("escalated · 10× its rule's limit") and body["items"][0]["ratio"] == 10
    rest = await _api(h, f"limit=10&cursor={body['cursor']}")
    assert [a["id"] for a in rest["items"]] == ranked[2:] and rest["cursor"] is None
    aged = await _api(h, "order=age")
    assert [a["id"] for a in aged["items"]] == [*small, huge, over]
    assert all(a["ranked"] is None for a in aged["items"])
    assert (await _api(h, "limit=2", token="tok-agent"))["waiting"] is None  # a token that decides nothing
    async with h.http.get(
        f"{h.bot_url}/api/v1/approvals?order=age&cursor={body['cursor']}", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as r:
        assert r.status == 422 and "cursor" in await r.text()  # a cursor continues its own order only

    # Deciding one takes it off every count.
    assert (await h.slack.command("U_SUPPORT2", "general", f"approve {huge}")).status == 200
    await h.settle()
    assert (await _api(h, "limit=1"))["waiting"] == 4
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    assert "4 approvals wait on you" in json.dumps(h.ephemeral("U_SUPPORT1")[-1].blocks, ensure_ascii=False)


async def test_time_to_first_interaction_is_measured_once_per_approval_by_rank_band(h: Harness) -> None:
    huge = await _pay(h, 5000, "V-5000")
    small = await _pay(h, 5, "V-5")
    await h.settle()
    h.clock.advance(90)  # a reviewer looks at the escalated one 92 s after it was asked (each _pay takes 1 s)
    assert (await h.slack.command("U_SUPPORT1", "general", f"show {huge}")).status == 200
    await h.rt.ctx.wait_idle()
    h.clock.advance(600)  # then decides it, and only then looks at the small one (by deciding it)
    assert (await h.slack.click("U_SUPPORT2", h.card_for(huge), "hitl_approve")).status == 200
    assert (await h.slack.click("U_SUPPORT2", h.card_for(small), "hitl_approve")).status == 200
    await h.settle()
    await h.rt.ctx.metrics.hitl.refresh()
    async with h.http.get(f"{h.bot_url}/metrics") as r:
        exposed = await r.text()
    assert 'hitl_first_interaction_seconds_count{tier="escalate",tool="pay"} 1.0' in exposed
    assert 'hitl_first_interaction_seconds_sum{tier="escalate",tool="pay"} 92.0' in exposed  # the look, not the click
    assert 'hitl_first_interaction_seconds_sum{tier="approve",tool="pay"} 691.0' in exposed  # its deciding click
    assert 'hitl_first_interaction_seconds_bucket{le="300",tier="escalate",tool="pay"} 1.0' in exposed
