"""One decision on several approvals: ``POST /api/v1/decisions`` on `hitl serve` (every store) and ``hitl resume ID
ID ...`` as a real process (through the API, and against the store), each member decided under its own rules and
audited, the answer saying what happened to each (decided, voted, stale, refused)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.api.cli_process import hitl, store_env
from tests.api.conftest import TOKENS, Api, Receiver, api_config
from tests.backends import BACKENDS, fresh_store_url
from tests.bot.conftest import ROOT, start, stop

REFUND_WORKFLOW = ROOT / "examples" / "refund" / "workflow.yaml"

TYPED_RULE = (
    "  rules:\n"
    "    - {name: typed_refund, tools: [refund], when: \"args.customer_id == 'C-TYPED'\", tier: escalate,\n"
    "       role: finance, confirm: [amount]}\n"
)
"""A refund to C-TYPED asks its finance approver to type the amount (``confirm:``)."""


def group_config(tmp: Path) -> Path:
    """The API's hitl.yaml (refund example, tokens) with :data:`TYPED_RULE` first among the rules."""
    path = api_config(tmp)
    path.write_text(path.read_text().replace("  rules:\n", TYPED_RULE, 1))
    return path


@pytest.fixture(params=BACKENDS)
async def group_api(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    store = open_store(fresh_store_url(request.param, request, tmp_path, tag="group"))
    config = group_config(tmp_path)
    h = await start(store, clock, config=config)
    yield Api(h, config, Receiver())
    await stop(h)


async def ask(api: Api, n: int, amount: int, customer: str = "C-1") -> dict[str, Any]:
    args = {"order_id": str(n), "customer_id": customer, "amount": amount}
    body = {"session": f"s{n}", "tool": "refund", "idempotency_key": f"k{n}", "args": args}
    status, proposal = await api.call("POST", "/proposals", as_="agent", json=body)
    assert status == 200 and proposal["verdict"] == "pending", proposal
    return dict(proposal["approval"])


def shown(*approvals: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": a["id"], "expected_version": a["version"], "action_hash": a["action_hash"]} for a in approvals]


async def test_each_member_is_decided_under_its_own_rules(group_api: Api) -> None:
    api = group_api
    quorum = await ask(api, 1, 700, "C-1")  # finance, two approvers
    moved = await ask(api, 2, 800, "C-2")  # finance, two approvers; another vote lands after it was shown
    support = await ask(api, 3, 10, "C-3")  # support: not finance's to decide
    typed = await ask(api, 4, 50, "C-TYPED")  # finance, the amount to type
    assert typed["confirm"] == ["amount"] and quorum["quorum"] == 2
    status, voted = await api.call(
        "POST",
        f"/approvals/{moved['id']}/decisions",
        as_="fin2",
        json={"decision": "approve", "expected_version": moved["version"], "action_hash": moved["action_hash"]},
    )
    assert status == 200 and voted["status"] == "pending" and voted["version"] > moved["version"]

    body = {"approvals": shown(quorum, moved, support, typed), "decision": "approve", "reason": "batch of refunds"}
    status, out = await api.call("POST", "/decisions", as_="fin1", json=body)
    assert status == 200, out
    got = {m["id"]: m for m in out["members"]}
    assert [m["id"] for m in out["members"]] == [quorum["id"], moved["id"], support["id"], typed["id"]]
    assert (got[quorum["id"]]["outcome"], got[quorum["id"]]["still_needs"]) == ("voted", 1)
    assert got[quorum["id"]]["approval"]["status"] == "pending"
    assert (got[moved["id"]]["outcome"], got[moved["id"]]["code"]) == ("stale", "stale_version")
    assert (got[support["id"]]["outcome"], got[support["id"]]["code"]) == ("refused", "not_eligible")
    assert (got[typed["id"]]["outcome"], got[typed["id"]]["code"]) == ("refused", "confirmation_mismatch")
    assert f"hitl resume {typed['id']} --approve --confirm" in got[typed["id"]]["message"]
    assert (out["decided"], out["voted"], out["stale"], out["refused"]) == (0, 1, 1, 2)

    # Recorded before answered, member by member, and audited on each.
    status, now = await api.call("GET", f"/approvals/{quorum['id']}", as_="fin1")
    assert [(d["reviewer"], d["via"]) for d in now["decisions"]] == [("U_FIN1", "api:fin1")]
    status, now = await api.call("GET", f"/approvals/{moved['id']}", as_="fin1")
    assert [d["reviewer"] for d in now["decisions"]] == ["U_FIN2"] and now["version"] == voted["version"]
    for member, code in ((moved, "stale_version"), (support, "not_eligible"), (typed, "confirmation_mismatch")):
        status, now = await api.call("GET", f"/approvals/{member['id']}", as_="fin1")
        assert now["status"] == "pending" and "U_FIN1" not in [d["reviewer"] for d in now["decisions"]]
        refusals = [(e["actor"], e["outcome"]) for e in now["audit"] if e["event"] == "refused"]
        assert refusals == [("U_FIN1", code)], (member["id"], refusals)

    # The support member and a fresh one go through for support; the finance member is not support's.
    other = await ask(api, 5, 20, "C-5")
    body = {"approvals": shown(support, other, quorum), "decision": "reject", "reason": "wrong orders"}
    status, out = await api.call("POST", "/decisions", as_="sup1", json=body)
    assert status == 200, out
    assert [(m["outcome"], m["code"]) for m in out["members"]] == [
        ("decided", None),
        ("decided", None),
        ("stale", "stale_version"),  # fin1's vote moved it since it was first shown
    ]
    assert [m["approval"]["status"] for m in out["members"][:2]] == ["rejected", "rejected"]


async def test_bad_group_requests_change_nothing(group_api: Api) -> None:
    api = group_api
    a = await ask(api, 1, 10)
    store = api.h.rt.store
    await api.h.settle()  # its card posted (and audited) first: what follows is the bad requests' alone
    audited = len(await store.audit.entries(limit=1000))
    bad: list[tuple[str, dict[str, Any], int, str]] = [
        ("sup1", {"approvals": shown(a, a), "decision": "approve"}, 422, "invalid_input"),
        ("sup1", {"approvals": [], "decision": "approve"}, 422, "invalid_input"),
        ("sup1", {"approvals": shown(a), "decision": "modify"}, 422, "invalid_input"),
        ("sup1", {"approvals": shown(a), "decision": "approve", "extra": 1}, 422, "invalid_input"),
        ("reader", {"approvals": shown(a), "decision": "approve"}, 403, "missing_scope"),
    ]
    for who, body, code, error in bad:
        status, out = await api.call("POST", "/decisions", as_=who, json=body)
        assert (status, out["error"]["code"]) == (code, error), (body, out)
    assert (await store.approvals.get(a["id"])).version == a["version"]
    new = (await store.audit.entries(limit=1000))[audited:]
    assert [e.outcome for e in new] == ["missing_scope"]  # the token's refusal only: nothing else was touched

    # A member this token may not see is refused as not found, as GET would answer; the others go through.
    status, out = await api.call(
        "POST", "/decisions", as_="emails", json={"approvals": shown(a), "decision": "approve"}
    )
    assert status == 200 and [(m["outcome"], m["code"], m["approval"]) for m in out["members"]] == [
        ("refused", "not_found", None)
    ]
    ghost = {"id": "apr_NOSUCH00", "version": 1, "action_hash": "0" * 64}
    status, out = await api.call("POST", "/decisions", json={"approvals": shown(ghost, a), "decision": "approve"})
    assert status == 200 and [(m["outcome"], m["code"]) for m in out["members"]] == [
        ("refused", "not_found"),
        ("decided", None),
    ]


async def test_the_cli_decides_a_group_through_the_api(group_api: Api) -> None:
    api = group_api
    first, second = await ask(api, 1, 10), await ask(api, 2, 20, "C-2")
    token = {"HITL_API_URL": api.h.bot_url, "HITL_TOKEN": TOKENS["sup1"][0], "HITL_STORE": "sqlite:///nonexistent/x.db"}
    code, out, err = await hitl(
        "resume", first["id"], second["id"], "--reject", "--reason", "duplicates", "--json", env=token
    )
    assert code == 3, (out, err)  # stopped by a decision: both rejected
    assert [(m["id"], m["outcome"], m["approval"]["status"]) for m in out["members"]] == [
        (first["id"], "decided", "rejected"),
        (second["id"], "decided", "rejected"),
    ]
    status, now = await api.call("GET", f"/approvals/{second['id']}")
    assert [(d["reviewer"], d["via"], d["reason"]) for d in now["decisions"]] == [
        ("U_SUPPORT1", "api:sup1", "duplicates")
    ]


def local_env(tmp: Path) -> dict[str, str]:
    return store_env(tmp, HITL_NOW="", HITL_API_URL="")


async def paused_refund(env: dict[str, str], order: str, amount: int) -> str:
    code, out, err = await hitl(
        "run", str(REFUND_WORKFLOW), "--var", f"order_id={order}", "--var", f"amount={amount}", "--json", env=env
    )
    assert code == 4, (out, err)
    return str(out["approval_id"])


async def test_the_cli_decides_a_group_against_the_store(tmp_path: Path) -> None:
    env = local_env(tmp_path)
    small = await paused_refund(env, "78291", 100)
    other = await paused_refund(env, "78300", 50)
    large = await paused_refund(env, "78291", 600)  # two finance approvers

    for wrong in (["--modify", "--set", "amount=1"], ["--trust"], ["--approve", "--var", "amount=1"], []):
        code, out, err = await hitl("resume", small, other, *wrong, "--as", "U_SUPPORT1", env=env)
        assert code == 2, (wrong, out, err)  # a usage error: nothing read, nothing recorded

    code, out, err = await hitl("resume", small, other, large, "--approve", "--as", "U_SUPPORT1", "--json", env=env)
    assert code == 1, (out, err)  # not every member went through
    assert [(m["outcome"], m["code"]) for m in out["members"]] == [
        ("decided", None),
        ("decided", None),
        ("refused", "not_eligible"),  # finance's, not support's
    ]
    assert (out["decided"], out["refused"]) == (2, 1)
    with sqlite3.connect(env["SHOP_DB"]) as db:  # both runs went on, here: their refunds ran once each
        assert sorted(db.execute("SELECT order_id, amount FROM refunds").fetchall()) == [("78291", 100), ("78300", 50)]

    code, out, err = await hitl("resume", large, small, "--approve", "--as", "U_FIN1", env=env)
    assert code == 1, (out, err)
    assert "approved 0 of 2, 1 voted on, 1 refused" in out
    assert f"{large}  voted: not approved yet, it needs 1 more finance approval" in out
    assert f"{small}  refused (already_decided)" in out
    code, shown, err = await hitl("show", large, "--json", env=env)
    assert shown["status"] == "pending" and [d["reviewer"] for d in shown["decisions"]] == ["U_FIN1"]
