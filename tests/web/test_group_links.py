"""Group cards link each member to its decision page ("Open in browser") when `web:` is configured, on the card, in
View all, and once the group is decided. Through signed Slack requests to the bot
that `hitl serve` runs, against the Slack stand-in."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.bot.views.group_cards import ACTION_GROUP_APPROVE, ACTION_GROUP_VIEW
from hitl.engine.domain.grouping import in_order
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock
from tests.bot.conftest import CONFIG, Harness, start, stop
from tests.bot.test_group_cards import flood, group_message
from tests.refund_config import write_refund_config

PUBLIC = "https://hitl.example.com"


def links(blocks: list[dict[str, object]]) -> dict[str, str]:
    """Each member line's "Open in browser" address, by the member's id."""
    found = {}
    for b in blocks:
        block_id = str(b.get("block_id", ""))
        if block_id.startswith("hitl_member:"):
            text = json.dumps(b)
            link = re.search(r"<(https://[^|>]+)\|Open in browser>", text)
            if link is not None:
                found[block_id.split(":", 1)[1]] = link[1]
    return found


@pytest.fixture
async def webbed(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    """The bot with a `web:` section in its hitl.yaml (its provider is never asked: nobody signs in here)."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.setenv("HITL_OIDC_SECRET", "unused")
    config = tmp_path / "hitl.yaml"
    write_refund_config(
        config,
        CONFIG.read_text() + f"\nweb:\n  public_url: {PUBLIC}\n  oidc:\n    issuer: https://id.example.com\n"
        "    client_id: hitl\n    client_secret_env: HITL_OIDC_SECRET\n",
    )
    h = await start(SqliteStore(tmp_path / "bot.db"), clock, config=config)
    yield h
    await stop(h)


async def test_each_member_of_a_group_card_opens_in_browser(webbed: Harness) -> None:
    h = webbed
    members = await flood(h, 7)
    card = group_message(h)
    first_few = {a.id: f"{PUBLIC}/inbox/approvals/{a.id}" for a in in_order(members)[:5]}  # the first few
    assert links(card.blocks) == first_few
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_VIEW)).status == 200
    await h.settle()
    listed = h.state.views[list(h.state.views)[-1]]["blocks"]
    assert links(listed) == {a.id: f"{PUBLIC}/inbox/approvals/{a.id}" for a in members}
    assert (await h.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_GROUP_APPROVE)).status == 200
    await h.settle()
    decided = group_message(h)
    assert links(decided.blocks) == {a.id: f"{PUBLIC}/inbox/approvals/{a.id}" for a in members}
