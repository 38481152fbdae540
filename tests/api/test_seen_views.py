"""A record of what each decider saw, through the real paths: the digest of the view a Slack card drew rides its
signed click; the API gives every approval's ``view_digest`` and a decision may echo it; a CLI decision shows no
view and says so; the decision's audit entry keeps the view, `hitl audit show` prints it and checks it, and a view
older than the approval's current version is refused as stale. One SQLite store: the stores' part (the entry keeps
the view, verify checks it) is in the conformance suite."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hitl.bot.views.controls import ACTION_APPROVE
from hitl.engine.domain.decide import NO_VIEW
from hitl.engine.domain.presentation import digest_of
from hitl.testing import FakeClock
from tests.api.cli_process import hitl
from tests.api.conftest import TOKENS, WEBHOOK_SECRET, Api, sqlite_api

SMALL = {"order_id": "1", "customer_id": "C-1", "amount": 40}
LARGE = {"order_id": "2", "customer_id": "C-2", "amount": 900}


async def _propose(api: Api, key: str, args: dict[str, Any]) -> dict[str, Any]:
    body = {"session": "s-seen", "tool": "refund", "idempotency_key": key, "args": args}
    status, asked = await api.call("POST", "/proposals", as_="agent", json=body)
    assert status == 200 and asked["verdict"] == "pending", asked
    return dict(asked["approval"])


async def _decided_entries(api: Api, approval_id: str) -> list[dict[str, Any]]:
    status, shown = await api.call("GET", f"/approvals/{approval_id}", as_="sup1")
    assert status == 200
    return [e for e in shown["audit"] if e["event"] in ("decided", "refused")]


def _bound(a: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"expected_version": a["version"], "action_hash": a["action_hash"], **more}


@pytest.fixture
async def api(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.setenv("HITL_TEST_WEBHOOK_SECRET", WEBHOOK_SECRET)
    async with sqlite_api(tmp_path, clock, hooks=True) as made:
        yield made


async def test_a_slack_click_carries_the_cards_view_and_its_entry_keeps_it(api: Api) -> None:
    a = await _propose(api, "k-slack", SMALL)
    await api.h.settle()
    card = api.h.card_for(a["id"])
    [approve] = [
        e for b in card.blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == ACTION_APPROVE
    ]
    drawn = approve["value"].split("|")[3]
    assert drawn == a["view_digest"] == digest_of(a["view"])  # the card and the API draw one view
    heading = card.blocks[0]["text"]["text"]
    assert heading == a["view"]["heading"]  # the order id "1" is declared `type: string`: text by contract, unmarked

    assert (await api.h.slack.click("U_SUPPORT1", card, ACTION_APPROVE)).status == 200
    [entry] = await _decided_entries(api, a["id"])
    assert entry["view_digest"] == drawn and entry["view"] == a["view"] and NO_VIEW not in entry["detail"]

    # The webhook's events carry the view too: the created event, the one the card drew.
    await api.h.rt.webhooks.sweep()
    events = [e for e in api.hooks.events() if e["type"] == "approval.created"]
    assert events[0]["data"]["view_digest"] == drawn and events[0]["data"]["view"] == a["view"]

    # hitl audit show (through the API, as a CLI process) prints the view the decider saw and checks it.
    env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS["sup1"][0], "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, shown, err = await hitl("audit", "show", a["id"], "--json", env=env)
    assert code == 0, err
    assert shown["intact"] is True and [d["view_checks"] for d in shown["decisions"]] == [True]
    assert shown["decisions"][0]["view"]["heading"] == heading
    code, text, err = await hitl("audit", "show", a["id"], env=env)
    assert code == 0 and "card as shown at version 1 (checked)" in text and a["view"]["heading"] in text, (text, err)


async def test_an_api_decision_echoes_the_view_and_an_older_view_is_refused_as_stale(api: Api) -> None:
    a = await _propose(api, "k-large", LARGE)  # two finance approvers
    first = _bound(a, decision="approve", view_digest=a["view_digest"])
    status, after = await api.call("POST", f"/approvals/{a['id']}/decisions", as_="fin1", json=first)
    assert status == 200 and after["approvals"] == 1 and after["view_digest"] != a["view_digest"]

    # The second approver names the current version and hash, but the view they read is the one before the vote.
    old = _bound(after, decision="approve", view_digest=a["view_digest"])
    status, refused = await api.call("POST", f"/approvals/{a['id']}/decisions", as_="fin2", json=old)
    assert status == 409 and refused["error"]["code"] == "stale_version", refused
    assert "look at it again" in refused["error"]["message"]
    status, unchanged = await api.call("GET", f"/approvals/{a['id']}", as_="fin2")
    assert (unchanged["status"], unchanged["version"]) == ("pending", after["version"])

    fresh = _bound(unchanged, decision="approve", view_digest=unchanged["view_digest"])
    status, done = await api.call("POST", f"/approvals/{a['id']}/decisions", as_="fin2", json=fresh)
    assert status == 200 and done["status"] == "approved"
    voted, stale, approved = await _decided_entries(api, a["id"])
    assert (voted["view"], voted["view_digest"]) == (a["view"], a["view_digest"])
    assert stale["event"] == "refused" and stale["outcome"] == "stale_version" and stale["view"] is None
    assert approved["view"]["approvals"] == 1 and approved["view_digest"] == unchanged["view_digest"]

    # A digest that is not 64 hex characters is bad input, refused before anything is read.
    status, bad = await api.call(
        "POST", f"/approvals/{a['id']}/decisions", as_="fin2", json={**fresh, "view_digest": "abc"}
    )
    assert status == 422 and "view_digest" in str(bad)


async def test_a_cli_decision_shows_no_view_and_its_entry_says_so(api: Api) -> None:
    a = await _propose(api, "k-cli", SMALL)
    env = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS["sup2"][0], "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, body, err = await hitl("resume", a["id"], "--approve", "--json", env=env)
    assert code == 0 and body["approval"]["status"] == "approved", (body, err)
    [entry] = await _decided_entries(api, a["id"])
    assert entry["view"] is None and entry["view_digest"] is None and entry["detail"].endswith(NO_VIEW)
    code, text, err = await hitl("audit", "show", a["id"], env=env)
    assert code == 0 and re.search(rf"^saw +{NO_VIEW}$", text, re.MULTILINE), (text, err)
