"""The reviewer's Home tab, their inbox: published when they open it (``app_home_opened`` over the real signed HTTP
path), showing what they may decide now with a link to each card, what they decided lately and the trust in force;
published again when any of it changes, once per viewer per burst of changes."""

from __future__ import annotations

import json
import time
from typing import Any

from slack_sdk.models.blocks import Block

from hitl.bot.views.controls import ACTION_APPROVE, ACTION_TRUST
from hitl.bot.views.home import HOME_DECIDED, HOME_TRUST, HOME_WAITING, Waiting, home_view
from hitl.engine.domain.models import Decision, DecisionKind
from hitl.engine.domain.records import TrustGrant
from hitl.sandbox.dispatch import sign
from hitl.sandbox.limits import home_problems
from hitl.testing import FakeClock, make_approval
from tests.bot.conftest import SECRET, Harness
from tests.bot.test_modals_and_commands import propose


def publishes(h: Harness, user: str) -> int:
    return sum(1 for c in h.state.calls_to("views.publish") if c.args.get("user_id") == user and c.response["ok"])


def part(h: Harness, user: str, prefix: str) -> list[str]:
    return [b["text"]["text"] for b in h.state.homes[user]["blocks"] if str(b.get("block_id", "")).startswith(prefix)]


async def opened(h: Harness, user: str) -> None:
    r = await h.slack.home_opened(user)
    assert r.status == 200, r.body
    await h.rt.ctx.home.settled()


async def test_the_home_tab_is_an_inbox_kept_current(harness: Harness) -> None:
    h = harness
    a = await propose(h, 120, "ses_home")
    await h.settle()
    await opened(h, "U_SUPPORT1")
    await opened(h, "U_FIN1")
    [waiting] = part(h, "U_SUPPORT1", HOME_WAITING)
    assert "*Refund USD 120.00 to “C-1042” for order “78291”*" in waiting and "4 h left" in waiting
    assert "expires" not in waiting  # issue 63: time left said once
    card = h.card_for(a.id)
    assert f"<{h.emulator.url}/archives/{card.channel}/p{card.ts.replace('.', '')}|Open the card>" in waiting
    assert part(h, "U_FIN1", HOME_WAITING) == []  # a support refund is not finance's to decide
    assert "Nothing is waiting for you" in json.dumps(h.state.homes["U_FIN1"])

    support, finance = publishes(h, "U_SUPPORT1"), publishes(h, "U_FIN1")
    assert (await h.slack.click("U_SUPPORT1", card, ACTION_APPROVE)).status == 200
    await h.settle()
    await h.rt.ctx.home.settled()
    assert part(h, "U_SUPPORT1", HOME_WAITING) == []
    [decided] = part(h, "U_SUPPORT1", HOME_DECIDED)
    assert decided.startswith("Approved *Refund USD 120.00 to “C-1042” for order “78291”*") and "via slack" in decided
    # Republished for the one it concerns, once per burst (approved, then executed: one or two bursts).
    assert 1 <= publishes(h, "U_SUPPORT1") - support <= 2
    assert publishes(h, "U_FIN1") == finance  # nothing finance sees changed

    b = await propose(h, 30, "ses_trusted")
    await h.settle()
    await h.rt.ctx.home.settled()
    assert len(part(h, "U_SUPPORT1", HOME_WAITING)) == 1  # a new card: the inbox shows it without reopening
    assert (await h.slack.click("U_SUPPORT2", h.card_for(b.id), ACTION_TRUST)).status == 200
    await h.settle()
    await h.rt.ctx.home.settled()
    [grant] = part(h, "U_FIN1", HOME_TRUST)  # shown to everyone who may decide refunds (finance, by its rules)
    assert "`refund` called by `agent:riley` in session `ses_trusted` runs without review until" in grant
    assert "<@U_SUPPORT2>" in grant

    r = await h.slack.command("U_SUPPORT1", "refund-approvals", "trust revoke refund ses_trusted")
    assert r.status == 200
    await h.rt.ctx.home.settled()
    assert part(h, "U_FIN1", HOME_TRUST) == [] and "No tool you review is trusted" in json.dumps(
        h.state.homes["U_FIN1"]
    )


async def test_a_burst_of_changes_publishes_each_tab_once(sqlite_harness: Harness) -> None:
    h = sqlite_harness
    a = await propose(h, 120, "ses_burst")
    await h.settle()
    await opened(h, "U_SUPPORT1")
    await opened(h, "U_SUPPORT2")
    before = {u: publishes(h, u) for u in ("U_SUPPORT1", "U_SUPPORT2")}
    for _ in range(5):
        await h.rt.ctx.home.changed(a)
    await h.rt.ctx.home.settled()
    assert {u: publishes(h, u) - n for u, n in before.items()} == {"U_SUPPORT1": 1, "U_SUPPORT2": 1}


async def test_events_are_signed_and_only_those_hitl_subscribes_to_are_taken(sqlite_harness: Harness) -> None:
    h = sqlite_harness

    async def post(payload: dict[str, Any], *, secret: str = SECRET) -> tuple[int, str]:
        body, ts = json.dumps(payload), int(time.time())
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": sign(secret, body, ts),
        }
        async with h.http.post(f"{h.bot_url}/slack/events", data=body.encode(), headers=headers) as resp:
            return resp.status, await resp.text()

    status, text = await post({"type": "url_verification", "token": "t", "challenge": "c-123"})
    assert status == 200 and "c-123" in text  # Slack's check of the request URL
    opened_event = {"type": "event_callback", "event": {"type": "app_home_opened", "user": "U_SUPPORT1", "tab": "home"}}
    assert (await post(opened_event, secret="wrong"))[0] == 401
    assert (await post({"type": "event_callback", "event": {"type": "message", "text": "hi"}}))[0] == 400
    assert (await post({"type": "event_callback", "event": {"type": "app_home_opened", "user": "<@x>"}}))[0] == 400
    assert "U_SUPPORT1" not in h.state.homes  # nothing refused was published
    messages_tab = {
        "type": "event_callback",
        "event": {"type": "app_home_opened", "user": "U_SUPPORT1", "tab": "messages"},
    }
    assert (await post(messages_tab))[0] == 200
    await h.rt.ctx.wait_idle()
    assert "U_SUPPORT1" not in h.state.homes  # the Messages tab is not ours to draw


def test_every_home_view_is_valid_block_kit_and_escapes_what_agents_wrote() -> None:
    now = FakeClock().now()
    hostile = make_approval(now=now, tool="refund<!channel>", session_id="s*<@U1>*").model_copy(
        update={"summary": "Pay <!here> *now*"}
    )
    vote = Decision(reviewer="U_SUPPORT1", kind=DecisionKind.REJECT, at=now - 120, version=1, via="slack")
    grant = TrustGrant(
        session_id="s<!channel>", requester="agent:riley", tool="refund", granted_by="U_SUPPORT2", until=now + 3600
    )
    many = [Waiting(hostile, None) for _ in range(40)]
    for view in (
        home_view("U_SUPPORT1", waiting=[], more_waiting=False, decided=[], grants=[], now=now),
        home_view(
            "U_SUPPORT1", waiting=many, more_waiting=True, decided=[(hostile, vote)] * 40, grants=[grant] * 40, now=now
        ),
    ):
        assert home_problems(view) == []
        for block in view["blocks"]:
            assert Block.parse(block) is not None
            Block.parse(block).to_dict()  # type: ignore[union-attr]
        text = json.dumps(view)
        assert "<!channel>" not in text and "<!here>" not in text and "<@U1>" not in text
    one = home_view("U", waiting=many[:1], more_waiting=False, decided=[], grants=[], now=now)
    # The card's headline, escaped for mrkdwn: shown as it is, mentioning nobody.
    assert "Pay &lt;!here&gt; *now*" in json.dumps(one, ensure_ascii=False)
