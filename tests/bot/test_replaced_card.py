"""Issue 63 item 4: a replaced card links to where the approval went. A reviewer's Modify that needs other approvers
(a refund raised past finance's limit) supersedes the approval with a new one on a new card; the old card, brought
up to date over the fake Slack Web API, says it was replaced and links (``chat.getPermalink``) to the new card,
whichever of the two Slack calls lands first. On every store."""

from __future__ import annotations

import copy
import json
from typing import Any

from hitl.bot.views.controls import ACTION_MODIFY
from hitl.engine.domain.models import Status
from tests.bot.conftest import Harness
from tests.bot.test_modals_and_commands import field_values, last_view, propose


async def test_a_card_an_edit_replaced_links_to_the_new_card(harness: Harness) -> None:
    a = await propose(harness, amount=100, session="ses_replaced")
    await harness.settle()
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.card_for(a.id)), ACTION_MODIFY)
    view_id, view = last_view(harness)
    assert (await harness.slack.submit("U_SUPPORT1", view_id, field_values(view, amount=900))).status == 200
    await harness.settle()
    old = await harness.svc.store.approvals.get(a.id)
    assert old.status is Status.SUPERSEDED and old.superseded_by is not None
    new = await harness.svc.store.approvals.get(old.superseded_by)
    assert new.supersedes == a.id
    new_card = harness.card_for(new.id)
    permalink = f"{harness.state.base_url}/archives/{new_card.channel}/p{new_card.ts.replace('.', '')}"
    link = {"type": "link", "url": permalink, "text": "decide it on the new card"}
    assert _replaced_line(harness, a.id) == [{"type": "text", "text": " Replaced: "}, link]
    # Drawn again by a card update alone (the new card posted long before): the link stays.
    await harness.rt.ctx.notifier.approval_changed(old)
    await harness.settle()
    assert _replaced_line(harness, a.id) == [{"type": "text", "text": " Replaced: "}, link]
    # The old card keeps no live control, and its story still says who edited it and where it went.
    blocks = json.dumps(harness.card_for(a.id).blocks)
    assert '"type": "button"' not in blocks and f"went on as {new.id}" in blocks


def _replaced_line(harness: Harness, approval_id: str) -> list[dict[str, Any]]:
    """What the old card's "replaced" line says after its emoji (it must have exactly one such line)."""
    [line] = [b for b in harness.card_for(approval_id).blocks if b.get("block_id") == f"hitl_replaced:{approval_id}"]
    assert line["type"] == "rich_text" and line["elements"][0]["elements"][0]["type"] == "emoji"
    return list(line["elements"][0]["elements"][1:])
