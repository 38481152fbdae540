"""An unanswered approval is handed on before it expires: halfway through its hour the finance role may decide it
too (the support reviewers still may, and a vote cast still counts); its card is posted again with live buttons,
says so and mentions finance; the audit records it once; finance's Home tab, ``/hitl pending`` and the API list it.
At the deadline it still expires, never approved. Over signed Slack requests and the HTTP API, on every store."""

from __future__ import annotations

import copy
import json

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.bot.views.home import HOME_WAITING
from hitl.engine.domain.models import Approval, Status
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

TOKEN = "tok-fin-handed"
CONFIG = (
    payments.requested_by_riley(support="[U_SUPPORT1, U_SUPPORT2]", finance="[U_FIN1, U_FIN2]")
    + payments.tool(
        "pay", tier="approve", role="support", quorum=2, timeout="1h", hand_on_after="50%", backup_role="finance"
    )
    + payments.api_tokens(token("fin1", TOKEN, "U_FIN1"))
)

h = harness_serving(CONFIG)


async def _pay(h: Harness, to: str) -> Approval:
    a = await pay(h, 40, to)
    assert a.backup_role == "finance"
    return a


async def _events(h: Harness, a: Approval) -> list[str]:
    return [e.event for e in await h.svc.store.audit.entries(approval_id=a.id)]


async def _api_pending(h: Harness) -> list[str]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with h.http.get(f"{h.bot_url}/api/v1/approvals?decidable=true", headers=headers) as r:
        assert r.status == 200
        return [a["id"] for a in (await r.json())["items"]]


async def test_an_unanswered_approval_is_handed_on_halfway_and_its_backup_role_may_decide_it(h: Harness) -> None:
    a = await _pay(h, "V-1")
    first = h.card_for(a.id)
    assert "finance in 30 min if still waiting" in json.dumps(first.blocks, ensure_ascii=False)
    assert (await h.slack.click("U_SUPPORT1", first, ACTION_APPROVE)).status == 200  # one vote of two, before
    await h.settle()
    assert (await h.slack.click("U_FIN1", h.card_for(a.id), ACTION_APPROVE)).status == 200  # too early: refused
    await h.settle()
    assert [e for e in await _events(h, a) if e == "refused"] == ["refused"]
    assert await _api_pending(h) == []

    h.clock.advance(30 * 60)  # halfway through its hour
    await h.rt.ctx.notifier.sweep()
    await h.rt.ctx.notifier.sweep()  # a second sweep (or replica) hands nothing on again
    await h.settle()
    assert (await _events(h, a)).count("handed_on") == 1
    await h.rt.ctx.metrics.hitl.refresh()
    async with h.http.get(f"{h.bot_url}/metrics") as r:
        assert 'hitl_actions{outcome="handed_on",tier="approve",tool="pay"} 1.0' in await r.text()
    card = h.card_for(a.id)
    assert (card.channel, card.ts) != (first.channel, first.ts)  # posted again, with live buttons
    text = json.dumps(card.blocks, ensure_ascii=False)
    assert "Handed on to finance" in text and "<@U_FIN1> <@U_FIN2>" in text and "support, and finance" in text
    assert ACTION_APPROVE in text
    earlier = next(m for m in h.state.messages if (m.channel, m.ts) == (first.channel, first.ts))
    assert "decide it on the newer card" in json.dumps(earlier.blocks) and ACTION_APPROVE not in json.dumps(
        earlier.blocks
    )

    # Finance sees it wherever it looks: the API, /hitl pending, the Home tab.
    assert await _api_pending(h) == [a.id]
    assert (await h.slack.command("U_FIN1", "general", "pending")).status == 200
    assert a.id in json.dumps(h.ephemeral("U_FIN1")[-1].blocks) and "1 approval waits on you" in json.dumps(
        h.ephemeral("U_FIN1")[-1].blocks
    )
    assert (await h.slack.home_opened("U_FIN1")).status == 200
    await h.rt.ctx.home.settled()
    assert [b for b in h.state.homes["U_FIN1"]["blocks"] if str(b.get("block_id", "")).startswith(HOME_WAITING)]

    assert (await h.slack.click("U_FIN1", card, ACTION_APPROVE)).status == 200  # the second vote: approved
    await h.settle()
    done = await h.svc.store.approvals.get(a.id)
    assert done.status is Status.APPROVED and [d.reviewer for d in done.decisions] == ["U_SUPPORT1", "U_FIN1"]


async def test_at_the_deadline_a_handed_on_approval_still_expires(h: Harness) -> None:
    a = await _pay(h, "V-2")
    h.clock.advance(31 * 60)
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    assert "handed_on" in await _events(h, a)
    live = copy.deepcopy(h.card_for(a.id))  # the handed-on card as finance saw it
    h.clock.advance(30 * 60)
    await h.svc.expire_due()
    await h.settle()
    gone = await h.svc.store.approvals.get(a.id)
    assert gone.status is Status.EXPIRED and gone.decisions == ()
    assert (await h.slack.click("U_FIN1", live, ACTION_APPROVE)).status == 200
    assert (await h.svc.store.approvals.get(a.id)).status is Status.EXPIRED  # late clicks change nothing


FINANCE_DESK = (
    CONFIG.replace(
        "      backup_role: finance\n",
        '      backup_role: finance\n      summary: "Pay {{ args.amount | money }} to {{ args.to }}"\n',
    )
    + 'slack:\n  channels:\n    finance: "#finance-approvals"\n'
)
"""The same policy with a summary sentence, and the finance role's own channel."""

desk = harness_serving(FINANCE_DESK)


async def test_a_handed_on_card_goes_to_the_backup_roles_channel_and_the_old_card_links_to_it(desk: Harness) -> None:
    h = desk
    a = await pay(h, 40, "*APPROVED* <!here>")  # the headline carries a value written to look like hitl's own
    first = h.card_for(a.id)
    assert first.channel == h.state.channel("refund-approvals").id  # type: ignore[union-attr]
    h.clock.advance(30 * 60)
    await h.rt.ctx.notifier.sweep()
    await h.settle()

    [moved] = h.cards("finance-approvals")  # the finance role's channel, not the card's own
    assert a.id in moved.text and ACTION_APPROVE in json.dumps(moved.blocks)
    assert (h.card_for(a.id).channel, h.card_for(a.id).ts) == (moved.channel, moved.ts)

    earlier = next(m for m in h.state.messages if (m.channel, m.ts) == (first.channel, first.ts))
    [line] = earlier.blocks  # one line: the headline, where it went, and a link there
    assert line["type"] == "rich_text"
    runs = line["elements"][0]["elements"]
    headline = next(r for r in runs if r.get("style") == {"bold": True})
    assert headline["text"] == "Pay USD 40.00 to “*APPROVED* <!here>”"  # as the card's header, inert rich text
    assert any(r["type"] == "text" and "handed on to finance" in r["text"] for r in runs)
    [link] = [r for r in runs if r["type"] == "link"]
    permalink = f"{h.state.base_url}/archives/{moved.channel}/p{moved.ts.replace('.', '')}"
    assert link == {"type": "link", "url": permalink, "text": "decide it on the newer card"}
    assert ACTION_APPROVE not in json.dumps(earlier.blocks)

    # A reminder later goes to the new card's thread and calls each who may decide, backup role included.
    h.clock.advance(20 * 60)  # 10 minutes left: reminder_before
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    [reminder] = [m for m in h.state.messages if m.thread_ts == moved.ts]
    assert reminder.channel == moved.channel
    assert reminder.text.startswith("<@U_SUPPORT1> <@U_SUPPORT2> <@U_FIN1> <@U_FIN2>:")


lost_desk = harness_serving(FINANCE_DESK.replace("#finance-approvals", "#no-such-channel"))


async def test_a_backup_channel_slack_refuses_still_hands_the_card_on_in_its_own(lost_desk: Harness) -> None:
    h = lost_desk
    a = await pay(h, 40, "V-3")
    first = h.card_for(a.id)
    h.clock.advance(30 * 60)
    await h.rt.ctx.notifier.sweep()
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    assert (await _events(h, a)).count("handed_on") == 1
    moved = h.card_for(a.id)  # Slack knows no such channel: the card's own channel, mentioning finance
    assert moved.channel == first.channel and moved.ts != first.ts
    assert "<@U_FIN1> <@U_FIN2>" in json.dumps(moved.blocks)
    earlier = next(m for m in h.state.messages if (m.channel, m.ts) == (first.channel, first.ts))
    [link] = [r for r in earlier.blocks[0]["elements"][0]["elements"] if r["type"] == "link"]
    assert link["url"].endswith(f"/archives/{moved.channel}/p{moved.ts.replace('.', '')}")
