"""A tool's consequence in ``hitl serve``, where the API and Slack propose: computed in a worker process whose
environment holds no key or token, killed at its bound (the card posts at once saying it timed out, and the next
call gets a new worker), its output on the card read back from the fake Slack and on the approval the API answers
with; an agent cannot send one. On SQLite and Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.bot.views.consequence import CONSEQUENCE, CONSEQUENCE_LABEL
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.api.conftest import Api, Receiver, api_config
from tests.backends import fresh_store_url
from tests.bot.conftest import start, stop
from tests.slack_text import typed_texts
from tests.waiting import eventually

OURS = '      consequence: "shop_consequences:refund"\n      consequence_limits: {env: [SHOP_DB]}\n'
"""The example's own consequence, swapped for one that shows its worker's environment, sleeps or prints."""
CONSEQUENCE_LINES = (
    '      consequence: "tests.consequence_tools:refund"\n'
    "      consequence_limits: {timeout: 3s, workers: 2, env: [SHOP_REGION]}\n"
)


@pytest.fixture(params=("sqlite", "redis"))
async def served(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    # What the serving process holds and no consequence may see (a key named by the tool's env is refused at load).
    monkeypatch.setenv("HITL_RECEIPT_KEY", "never-in-a-worker")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "never-in-a-worker")
    monkeypatch.setenv("HITL_TOKEN", "never-in-a-worker")
    monkeypatch.setenv("OTHER_SECRET", "never-in-a-worker")
    monkeypatch.setenv("SHOP_REGION", "eu")  # named by the tool's consequence_limits.env: passed on
    config = api_config(tmp_path)
    text = config.read_text()
    assert OURS in text
    config.write_text(text.replace(OURS, CONSEQUENCE_LINES))
    store = open_store(fresh_store_url(request.param, request, tmp_path, tag="csq"))
    h = await start(store, clock, config=config)
    yield Api(h, config, Receiver())
    await stop(h)


async def propose(api: Api, order: str, reason: str = "", **more: Any) -> tuple[int, Any]:
    args = {"order_id": order, "customer_id": "C-1", "amount": 30, "reason": reason}
    body = {"session": "s1", "tool": "refund", "idempotency_key": order, "args": args, **more}
    return await api.call("POST", "/proposals", as_="agent", json=body)


def card_of(api: Api, approval_id: str) -> list[dict[str, Any]] | None:
    for m in api.h.cards():
        if approval_id in str(m.blocks):
            return m.blocks
    return None


async def test_a_worker_process_computes_it_without_keys_and_the_card_shows_it(served: Api) -> None:
    status, body = await propose(served, "E1", "environ")
    assert status in (200, 201), body
    c = body["approval"]["consequence"]
    assert c["outcome"] == "shown", c
    names = {row["name"] for row in c["table"]}
    held = {n for n in names if n.startswith(("HITL_", "SLACK_")) or n == "OTHER_SECRET"}
    assert {"PATH", "SHOP_REGION"} <= names and not held, names
    status, body = await propose(served, "A1", "print")  # its prints never reach the protocol
    a = body["approval"]
    assert a["consequence"]["summary"] == "Order A1 keeps 170.00 refundable"
    assert a["view"]["consequence"] == {"outcome": "shown", "sha256": a["consequence"]["sha256"]}
    blocks = await eventually(lambda: card_of(served, a["id"]), what="the card")
    ids = [b.get("block_id") for b in blocks]
    assert ":crystal_ball: *What will happen*" in blocks[ids.index(CONSEQUENCE_LABEL)]["elements"][0]["text"]
    box = "".join(text for _, text in typed_texts(blocks[ids.index(CONSEQUENCE)]))
    assert box.startswith("Order A1 keeps 170.00 refundable\nrefundable: 200.0 → 170.0")
    status, read = await served.call("GET", f"/approvals/{a['id']}")
    assert status == 200 and read["consequence"] == a["consequence"] and read["view_digest"] == a["view_digest"]
    audit = [e for e in read["audit"] if e["event"] == "consequence"]
    assert [e["outcome"] for e in audit] == ["shown"] and audit[0]["detail"].startswith("refund: args sha256 ")


async def test_one_past_its_bound_is_killed_and_the_card_posts_without_it(served: Api) -> None:
    status, body = await propose(served, "S1", "sleep")  # sleeps 60 s: killed at 3 s
    a = body["approval"]
    assert a["consequence"] == {**a["consequence"], "outcome": "timed_out", "why": "timed out after 3 s"}
    blocks = await eventually(lambda: card_of(served, a["id"]), what="the card")
    box = "".join(text for _, text in typed_texts(blocks[[b.get("block_id") for b in blocks].index(CONSEQUENCE)]))
    assert box == "No consequence (timed out after 3 s)"
    status, body = await propose(served, "N1")  # a new worker replaces the killed one
    assert body["approval"]["consequence"]["outcome"] == "shown"


async def test_an_agent_cannot_send_one(served: Api) -> None:
    status, body = await propose(served, "X1", consequence="tests.consequence_tools:hostile")
    assert status == 422, body
    args = {"order_id": "X2", "customer_id": "C-1", "amount": 30, "consequence": "x"}
    status, body = await served.call(
        "POST", "/proposals", as_="agent", json={"session": "s1", "tool": "refund", "args": args}
    )
    assert status == 422, body  # an argument of that name is not one either: the schema refuses it


async def test_a_flood_whose_consequence_sleeps_posts_every_card(served: Api) -> None:
    answers = await asyncio.gather(*(propose(served, f"F{i}", "sleep") for i in range(30)))
    assert {status for status, _ in answers} <= {200, 201}, answers[0]
    outcomes = sorted(body["approval"]["consequence"]["outcome"] for _, body in answers)
    assert outcomes == ["busy"] * 28 + ["timed_out"] * 2  # its two workers ran (and were killed); the rest at once
    ids = {body["approval"]["id"] for _, body in answers}

    async def carded() -> bool:  # on its own card or a group card (a flood is grouped): every one posted
        return all([await served.h.rt.store.messages.get(i) is not None for i in ids])

    assert await eventually(carded, what="every card")
    for m in served.h.cards():
        box = "".join(text for b in m.blocks if b.get("block_id") == CONSEQUENCE for _, text in typed_texts(b))
        assert box in ("", "No consequence (busy: 2 already running)", "No consequence (timed out after 3 s)"), box


async def test_a_modify_shows_the_consequence_of_what_will_run(served: Api) -> None:
    status, body = await propose(served, "M1")
    a = body["approval"]
    assert a["consequence"]["summary"] == "Order M1 keeps 170.00 refundable"
    decision = {"decision": "modify", "expected_version": a["version"], "action_hash": a["action_hash"]}
    status, done = await served.call(
        "POST", f"/approvals/{a['id']}/decisions", as_="sup1", json={**decision, "args": {"amount": 80}}
    )
    assert status == 200 and done["status"] == "approved", done
    c = done["consequence"]  # computed again, in a worker process, for the edited arguments
    assert c["summary"] == "Order M1 keeps 120.00 refundable" and c["sha256"] != a["consequence"]["sha256"], c
    assert done["view"]["consequence"] == {"outcome": "shown", "sha256": c["sha256"]}
    status, read = await served.call("GET", f"/approvals/{a['id']}")
    assert read["consequence"] == c
    assert [e["outcome"] for e in read["audit"] if e["event"] == "consequence"] == ["shown", "shown"]

    status, body = await propose(served, "M2")  # an edit that needs finance: asked with the edit's consequence
    b = body["approval"]
    decision = {"decision": "modify", "expected_version": b["version"], "action_hash": b["action_hash"]}
    status, done = await served.call(
        "POST", f"/approvals/{b['id']}/decisions", as_="sup1", json={**decision, "args": {"amount": 600}}
    )
    assert status == 200 and done["status"] == "superseded", done
    status, new = await served.call("GET", f"/approvals/{done['superseded_by']}", as_="fin1")
    assert status == 200 and new["consequence"]["summary"] == "Order M2 keeps -400.00 refundable", new


async def test_metrics_tell_each_tools_consequence_time_and_outcomes(served: Api) -> None:
    for order, reason in (("T1", ""), ("T2", "wrong"), ("T3", "")):
        status, body = await propose(served, order, reason)
        assert status in (200, 201), body
    await served.h.rt.ctx.metrics.hitl.refresh()  # the background sweep's read of the store
    async with served.h.http.get(f"{served.h.bot_url}/metrics") as resp:
        assert resp.status == 200
        exposed = await resp.text()
    samples = dict(line.rsplit(" ", 1) for line in exposed.splitlines() if line.startswith("hitl_consequence"))
    on = 'tier="approve",tool="refund"'
    assert samples[f"hitl_consequence_seconds_count{{{on}}}"] == "3.0", samples
    assert samples[f'hitl_consequence_seconds_bucket{{le="60",{on}}}'] == "3.0"
    assert float(samples[f"hitl_consequence_seconds_sum{{{on}}}"]) > 0  # each one's time, worker round trip and all
    ended = {o: samples[f'hitl_consequences{{outcome="{o}",{on}}}'] for o in ("shown", "busy", "timed_out", "failed")}
    assert ended == {"shown": "2.0", "busy": "0.0", "timed_out": "0.0", "failed": "1.0"}, ended
