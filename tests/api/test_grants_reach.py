"""A grant reaches exactly as far as a person meant, tried as an attacker would: `hitl serve`'s HTTP API with agent
tokens of two identities, and reviewers' Trust pressed as signed Slack clicks.

- A Trust covers the tool for the identity that asked, in the session it asked in: another token proposing in that
  session, or the same identity in another session, is asked about again.
- Another identity's approval is not there for a token: reading, waiting on or claiming it answers 404, and asking
  the same action again makes an approval of its own.
- A Trust on a practice approval grants nothing; its id, session and call id are drawn, not derived from the real
  approval's, and an agent's token neither lists nor reads it; to the people who decide, it has its real approval's
  form everywhere (its session and call id included), and its times tell the same story: it is created, carded
  and announced to webhooks at one moment, a while after its real approval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from hitl.api.models import iso
from hitl.bot.views.controls import ACTION_TRUST
from hitl.engine.domain.ids import approval_id
from hitl.testing import FakeClock
from tests.api.conftest import PRACTICE, WEBHOOK_SECRET, Api, sqlite_api

ARGS = {"order_id": "78291", "customer_id": "C-1", "amount": 49}


def _proposal(session: str, key: str, **args: Any) -> dict[str, Any]:
    return {"session": session, "tool": "refund", "args": {**ARGS, **args}, "idempotency_key": key}


def _trust_button(api: Api, approval: str) -> dict[str, Any]:
    card = api.h.card_for(approval)
    elements = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
    buttons: list[dict[str, Any]] = [e for e in elements if e["action_id"] == ACTION_TRUST]
    assert len(buttons) == 1
    return buttons[0]


async def test_a_trust_covers_the_identity_that_asked_in_its_session_alone(api: Api) -> None:
    status, asked = await api.call("POST", "/proposals", as_="agent", json=_proposal("riley-private-7", "k1"))
    assert status == 200 and asked["verdict"] == "pending"
    aid = asked["approval"]["id"]
    await api.h.settle()
    confirm = _trust_button(api, aid)["confirm"]["text"]["text"]
    assert confirm.startswith("For agent:remote only:") and len(confirm) <= 300  # the identity first
    await api.h.slack.click("U_SUPPORT1", api.h.card_for(aid), ACTION_TRUST)
    status, decided = await api.call("GET", f"/approvals/{aid}", as_="sup1")
    assert decided["status"] == "approved"

    status, same = await api.call("POST", "/proposals", as_="agent", json=_proposal("riley-private-7", "k2", amount=48))
    assert status == 200 and same["verdict"] == "run"  # the grant: this identity, this session
    status, other = await api.call(
        "POST", "/proposals", as_="agent2", json=_proposal("riley-private-7", "k3", amount=47)
    )
    assert status == 200 and other["verdict"] == "pending"  # another token in the same session is asked about
    assert other["approval"]["requester"] == "agent:other"
    status, elsewhere = await api.call("POST", "/proposals", as_="agent", json=_proposal("another", "k4", amount=46))
    assert status == 200 and elsewhere["verdict"] == "pending"
    grants = await api.h.rt.runtime.store.trust.all_active(now=api.h.clock.now())
    assert [(g.requester, g.session_id, g.tool) for g in grants] == [("agent:remote", "riley-private-7", "refund")]


async def test_another_identitys_approval_is_not_there_for_a_token(api: Api) -> None:
    status, mine = await api.call("POST", "/proposals", as_="agent", json=_proposal("s1", "same"))
    status, theirs = await api.call("POST", "/proposals", as_="agent2", json=_proposal("s1", "same"))
    assert mine["verdict"] == theirs["verdict"] == "pending"
    aid = mine["approval"]["id"]
    assert theirs["approval"]["id"] != aid  # asking the same again never attaches to another identity's approval
    bound = {"expected_version": 1, "action_hash": mine["approval"]["action_hash"]}
    status, _ = await api.call("POST", f"/approvals/{aid}/decisions", as_="sup1", json={"decision": "approve", **bound})
    assert status == 200

    claim = {"action_hash": mine["approval"]["action_hash"]}
    key = mine["execution_key"]
    for method, path, body in (
        ("GET", f"/approvals/{aid}", None),
        ("GET", f"/approvals/{aid}/wait?after_version=1&timeout=0", None),
        ("POST", f"/executions/{key}/claim", claim),
        ("POST", f"/executions/{key}/outcome", {"ok": True}),
    ):
        status, problem = await api.call(method, path, as_="agent2", json=body)
        assert status == 404 and problem["error"]["code"] == "not_found", (path, problem)
    status, listed = await api.call("GET", "/approvals?status=any", as_="agent2")
    assert [a["id"] for a in listed["items"]] == [theirs["approval"]["id"]]
    status, claimed = await api.call("POST", f"/executions/{key}/claim", as_="agent", json=claim)
    assert status == 200 and claimed["acquired"] is True  # the identity that asked still has it


async def test_a_trust_on_a_practice_approval_grants_nothing_and_the_agent_never_sees_it(practice_api: Api) -> None:
    api = practice_api
    status, asked = await api.call("POST", "/proposals", as_="agent", json=_proposal("s-real", "k1"))
    real = asked["approval"]["id"]
    status, listed = await api.call("GET", "/practice", as_="admin")
    [twin] = listed["items"]
    # Nothing of the twin follows from the real approval (the forms before were derived from it).
    assert twin["id"] != approval_id(f"practice:{real}") and twin["session_id"] != "s-real"
    assert twin["id"].startswith("apr_") and len(twin["id"]) == len(real)

    status, mine = await api.call("GET", "/approvals?status=any", as_="agent")
    assert [a["id"] for a in mine["items"]] == [real]  # the agent's own; never the twin
    status, _ = await api.call("GET", f"/approvals/{twin['id']}", as_="agent")
    assert status == 404

    await api.h.settle()
    assert _trust_button(api, twin["id"])  # a twin's card offers Trust like its real one's
    await api.h.slack.click("U_SUPPORT1", api.h.card_for(twin["id"]), ACTION_TRUST)
    status, after = await api.call("GET", f"/approvals/{twin['id']}", as_="admin")
    assert after["status"] == "approved" and after["decisions"][-1]["decision"] == "trust"  # recorded: a miss
    assert "the defect was missed" in api.h.ephemeral("U_SUPPORT1")[-1].text
    assert await api.h.rt.runtime.store.trust.all_active(now=api.h.clock.now()) == []
    status, again = await api.call("POST", "/proposals", as_="agent", json=_proposal(twin["session_id"], "k2"))
    assert again["verdict"] == "pending"  # nothing granted in the twin's session either


_MASKS = (
    (re.compile(r"apr_[0-9A-Z]{10}"), "<apr>"),  # an approval id (random; its form is checked apart)
    (re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])"), "<hash>"),  # an action hash or a view digest
    (re.compile(r"(?<![0-9a-z])[0-9a-f]{16}(?![0-9a-z])"), "<hash>"),  # a hash's first 16 digits, on the card
)
_CLASSES = ((re.compile(r"[0-9]"), "9"), (re.compile(r"[a-z]"), "a"), (re.compile(r"[A-Z]"), "A"))


def form(value: Any) -> Any:
    """``value`` in form only: keys and types kept, lists element by element, and each text, its approval ids
    and hashes masked, by the kind of character that stands where (``9`` a digit, ``a`` a lower-case letter,
    ``A`` an upper-case one, anything else itself): ``chat-42`` and ``chat-17`` have one form, ``ses_7KQ2M9XW3A``
    another; ``call-0`` and ``call-3`` one, ``dtsyqgcs`` another."""
    if isinstance(value, dict):
        return {k: form(v) for k, v in value.items()}
    if isinstance(value, list):
        return [form(v) for v in value]
    if isinstance(value, str):
        for pattern, replacement in (*_MASKS, *_CLASSES):
            value = pattern.sub(replacement, value)
        return value
    return type(value).__name__


def without_consequence(text: str) -> str:
    """The example's hitl.yaml without its refund consequence. A twin does not compute one of its own (it carries
    its real approval's, drawn for other arguments) and its audit has no ``consequence`` entry, so with one on
    the two do not yet look alike: a known gap of practice twins and consequences, left to its own issue."""
    lines = text.splitlines(keepends=True)
    return "".join(line for line in lines if not line.lstrip().startswith(("consequence:", "consequence_")))


async def test_a_twin_and_its_real_approval_look_alike_on_every_surface(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """To everyone who may decide them, a practice twin and its real approval have the same form, field by field:
    on the card, in the API's view and in the webhook events. An agent that picks its own session (``chat-42``)
    and call id (``call-0``) sees a twin of its call in a session and with a call id of that form (never the same
    ones), not in a session hitl made up. The real customer id has the planted one's form (``C-0000``), so the
    defect alone changes no form."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.setenv("HITL_TEST_WEBHOOK_SECRET", WEBHOOK_SECRET)
    async with sqlite_api(tmp_path, clock, extra=PRACTICE, hooks=True, edit=without_consequence) as api:
        proposal = _proposal("chat-42", "call-0", customer_id="C-4821")
        status, asked = await api.call("POST", "/proposals", as_="agent", json=proposal)
        real = asked["approval"]["id"]
        [twin] = (await api.call("GET", "/practice", as_="admin"))[1]["items"]
        await api.h.settle()
        views = [(await api.call("GET", f"/approvals/{i}", as_="sup1"))[1] for i in (real, twin["id"])]
        assert views[0]["session_id"] == "chat-42" and views[0]["asked_by"]["call_id"] == "call-0"
        assert form(views[0]) == form(views[1])
        assert views[1]["session_id"] != "chat-42" and views[1]["asked_by"]["call_id"] != "call-0"  # alike only
        assert form(api.h.card_for(real).blocks) == form(api.h.card_for(twin["id"]).blocks)
        for i in (real, twin["id"]):
            decision = {"decision": "approve", "expected_version": 1, "action_hash": None}
            decision["action_hash"] = next(v["action_hash"] for v in views if v["id"] == i)
            assert (await api.call("POST", f"/approvals/{i}/decisions", as_="sup1", json=decision))[0] == 200
        await api.h.rt.webhooks.sweep()
        events = api.hooks.events()
        by_approval = {i: [e for e in events if e["data"]["approval"]["id"] == i] for i in (real, twin["id"])}
        assert [e["type"] for e in by_approval[real]] == ["approval.created", "approval.decided"]
        assert [form(e) for e in by_approval[real]] == [form(e) for e in by_approval[twin["id"]]]


def _expires_in(card: Any) -> str:
    """The card's expiry as its reviewer reads it when it arrives ("in 4 h"), its date aside."""
    fields = [f["text"] for b in card.blocks for f in b.get("fields", []) if "*Expires*" in f["text"]]
    [shown] = [m.group(1) for f in fields if (m := re.search(r"\|[^>]*>\s*\(([^)]*)\)", f))]
    return shown


async def test_a_twin_is_created_when_its_card_comes_and_its_times_and_webhook_say_so(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A twin's card comes a random while (up to ``delay``) after its real one's, and the twin is created then, not
    before: until that moment nothing lists it and no webhook tells of it; from then its ``created_at`` is that
    moment and its expiry its real one's timeout after it, on the card, in the API and in its webhook, and its
    ``approval.created`` event goes out then. Each card arrives when its approval is created, so to a reviewer
    (and to a webhook consumer) the twin's timing tells the story its real approval's does."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    monkeypatch.setenv("HITL_TEST_WEBHOOK_SECRET", WEBHOOK_SECRET)
    later = PRACTICE.replace("delay: 0", "delay: 10m")
    async with sqlite_api(tmp_path, clock, extra=later, hooks=True) as api:
        asked_at = clock.now()
        status, asked = await api.call("POST", "/proposals", as_="agent", json=_proposal("chat-42", "call-0"))
        real = asked["approval"]["id"]
        await api.h.rt.background.tick()  # hitl serve's round: cards, webhooks, twins whose moment came
        await api.h.settle()
        assert (await api.call("GET", "/practice", as_="admin"))[1]["items"] == []  # nothing of it yet
        assert [m.ts for m in api.h.cards()] == [api.h.card_for(real).ts]
        assert [e["data"]["approval"]["id"] for e in api.hooks.events()] == [real]

        clock.advance(600)  # the longest a twin waits: its moment has come
        planted_at = clock.now()
        await api.h.rt.background.tick()
        await api.h.settle()
        await api.h.rt.webhooks.sweep()
        [twin] = (await api.call("GET", "/practice", as_="admin"))[1]["items"]
        views = {i: (await api.call("GET", f"/approvals/{i}", as_="sup1"))[1] for i in (real, twin["id"])}
        assert (views[real]["created_at"], views[twin["id"]]["created_at"]) == (iso(asked_at), iso(planted_at))
        assert views[twin["id"]]["expires_at"] == iso(planted_at + 4 * 3600)  # refund's 4 h, from its creation
        assert _expires_in(api.h.card_for(twin["id"])) == _expires_in(api.h.card_for(real)) == "in 4 h"
        created = {e["data"]["approval"]["id"]: e for e in api.hooks.events() if e["type"] == "approval.created"}
        assert (created[real]["at"], created[twin["id"]]["at"]) == (asked_at, planted_at)
        for i, event in created.items():
            assert event["data"]["approval"]["expires_at"] - event["at"] == 4 * 3600, i
