"""The queue reads by urgency and as a list (issue 63): a payment with one minute left ranks above three 3-hour
escalations on every list (``/hitl pending`` over signed Slack requests, the Home tab over the Events API, the HTTP
API) and says why; each tier wears its own icon and word; time left is said once; ``/hitl pending`` is a count and
two lines per approval with its sentence (amount included) and a link to its card, not a wall of cards; a value
with look-alike letters, or text that reads as a number, is marked on the card's header, the Home line and the
``/hitl pending`` line. On every store."""

from __future__ import annotations

import json
from typing import Any

from hitl.bot.views.home import HOME_WAITING
from hitl.engine.domain.requests import ProposeRequest
from tests.bot import payments
from tests.bot.conftest import Harness
from tests.bot.payments import harness_serving, pay, token

TOKEN = "tok-pay-1"
WIRE_SUMMARY = '"Wire {{ args.amount | money }} to {{ args.to }} for invoice {{ args.invoice }}"'
WIRE_SCHEMA = """      schema:
        type: object
        properties:
          to: {type: string, maxLength: 32}
          amount: {type: number, exclusiveMinimum: 0, x-currency: EUR}
          invoice: {maxLength: 32}  # no declared type: a string that reads as a number is marked
        required: [to, amount, invoice]
        additionalProperties: false
"""
CONFIG = (
    payments.requested_by_riley(payments="[U_SUPPORT1, U_SUPPORT2]")
    + payments.tool("wire", WIRE_SCHEMA, tier="escalate", role="payments", timeout="3h", summary=WIRE_SUMMARY)
    + payments.tool("pay", tier="approve", role="payments", timeout="1h", summary=payments.PAY_SUMMARY)
    + payments.api_tokens(token("pay1", TOKEN, "U_SUPPORT1"))
)

h = harness_serving(CONFIG)


async def _wire(h: Harness, amount: int, to: str, invoice: str) -> str:
    args = {"to": to, "amount": amount, "invoice": invoice}
    p = await h.svc.propose(ProposeRequest("wire", args, session_id=f"ses_{invoice}"))
    assert p.approval is not None
    await h.settle()
    h.clock.advance(1)  # each a second after the last: their deadlines, and so their ranks, differ
    return str(p.approval.id)


def _entries(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if str(b.get("block_id", "")).startswith("hitl_pending:")]


async def test_one_about_to_expire_ranks_first_on_every_list_and_each_is_two_lines(h: Harness) -> None:
    handed = (await pay(h, 40, "V-40")).id
    h.clock.advance(59 * 60 - 3)  # 1 min left of its hour once the three below are asked
    wires = [
        await _wire(h, 900, "ACME GmbH", "INV-1"),
        await _wire(h, 800, "p\u0430ypal.com", "INV-2"),  # a Cyrillic а: look-alike letters
        await _wire(h, 700, "Globex", "1000"),  # an invoice "number" that is text
    ]
    await h.settle()

    # /hitl pending over a signed slash command: the one about to expire first, whatever its tier.
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    reply = h.ephemeral("U_SUPPORT1")[-1]
    entries = _entries(reply.blocks)
    assert [e for b in reply.blocks if (e := str(b.get("block_id", ""))).startswith("hitl_pending:")] == [
        f"hitl_pending:{i}" for i in [handed, *wires]
    ]
    assert "*4 approvals wait on you*, the most important first" in json.dumps(reply.blocks, ensure_ascii=False)
    assert len(reply.blocks) == 5 and all(b["type"] == "section" for b in reply.blocks)  # a list, not 4 cards
    first, acme, look_alike, text_number = entries
    assert first.startswith("*Pay USD 40.00 to “V-40”*\n")
    assert "\n:ballot_box_with_check: due soon, so first: 1 min left · approve · <" in first
    assert acme.startswith("*Wire EUR 900.00 to “ACME GmbH” for invoice “INV-1”*\n:rotating_light: escalated · 2 h")
    for entry in entries:  # two lines: the sentence, then tier, time left once and how to act
        assert entry.count("\n") == 1 and entry.count(" left") == 1 and "expires" not in entry, entry
        assert "|Open the card>" in entry
    # Marks where the eye is: on the line's sentence, and which argument and why.
    assert look_alike.startswith(":warning: *Wire EUR 800.00 to “pаypal.com”")
    assert ":warning: *Look closely:* to: look-alike letters" in look_alike
    assert text_number.startswith(":warning: *Wire EUR 700.00 to “Globex” for invoice “1000”*")
    assert "*Look closely:* invoice: text that reads as a number" in text_number
    assert not acme.startswith(":warning:") and "Look closely" not in acme

    # The card itself: the header carries the mark, and the line under the top says which argument.
    card = h.card_for(wires[1]).blocks
    assert card[0]["text"]["text"].startswith("⚠ Approval needed: Wire EUR 800.00")
    [look] = [b for b in card if str(b.get("block_id", "")).startswith("hitl_look:")]
    assert "to: look-alike letters" in look["elements"][0]["text"]
    assert not h.card_for(wires[0]).blocks[0]["text"]["text"].startswith("⚠")

    # The Home tab, over the Events API: the same order, the same lines, time left once.
    assert (await h.slack.home_opened("U_SUPPORT1")).status == 200
    await h.rt.ctx.home.settled()
    home = h.state.homes["U_SUPPORT1"]["blocks"]
    waiting = [b["text"]["text"] for b in home if str(b.get("block_id", "")).startswith(HOME_WAITING)]
    assert [w.split("\n")[:2] for w in waiting] == [e.split("\n") for e in entries]
    assert all(w.count(" left") == 1 and "expires" not in w for w in waiting)

    # The HTTP API lists in the same order and says why.
    async with h.http.get(f"{h.bot_url}/api/v1/approvals", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        body = await r.json()
    assert [a["id"] for a in body["items"]] == [handed, *wires]
    assert body["items"][0]["ranked"] == "due soon, so first: 1 min left · approve"


async def test_the_floor_is_ten_minutes_or_a_tenth_of_the_timeout(h: Harness) -> None:
    calm = (await pay(h, 40, "V-40")).id
    h.clock.advance(49 * 60)  # 11 min left of its hour: not yet due soon (the floor is 10 min)
    wire = await _wire(h, 900, "ACME GmbH", "INV-1")
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    assert [e.split("*")[1][:4] for e in _entries(h.ephemeral("U_SUPPORT1")[-1].blocks)] == ["Wire", "Pay "]
    h.clock.advance(2 * 60)  # under 9 min left
    assert (await h.slack.command("U_SUPPORT1", "general", "pending")).status == 200
    entries = _entries(h.ephemeral("U_SUPPORT1")[-1].blocks)
    assert [e.split("*")[1][:4] for e in entries] == ["Pay ", "Wire"] and calm and wire
    assert "due soon, so first: 8 min left" in entries[0]  # 8 min 59 s
