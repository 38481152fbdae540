"""A decision `hitl resume` makes against the store `hitl serve` serves (a real process, holding no Slack client)
draws the card again as a click does: once, through `hitl serve`'s card-update worker, showing the decision, its
buttons gone; a group's `hitl resume ID ID ... --approve` draws the group card once for all its members, as Approve
all does; `hitl expire` draws what it expired; a refused local decision queues nothing. On SQLite and Redis, against
`hitl serve`'s harness (its card worker's next look at the queue made at once) and against a `hitl serve` process.
A card update that cannot be queued (the store away) is said, and undoes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.bot.outbound.queued_cards import QueuedCards
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message
from hitl.testing import FakeClock, make_approval
from tests.api.cli_process import hitl as run_hitl
from tests.backends import fresh_store_url
from tests.bot.conftest import CONFIG, Harness, harness_on, serve_env, serve_process, workspace
from tests.bot.test_group_cards import buttons, flood, group_message
from tests.ports import free_port
from tests.waiting import eventually


@pytest.fixture(params=("sqlite", "redis"))
async def served(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    """`hitl serve` (the refund example's hitl.yaml) on each store, which a `hitl` command opens too."""
    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))  # the refund consequence's shop, for both processes
    monkeypatch.setenv("HITL_CONFIG", str(tmp_path / "hitl.yaml"))  # what harness_on writes, for the command
    async with harness_on(request, tmp_path, clock, CONFIG.read_text()) as h:
        yield h


async def local(h: Harness, *argv: str, at: float | None = None) -> tuple[int, Any, str]:
    """`hitl ARGV --json` as a real process against the store `hitl serve` serves (no API: its own runtime, no Slack
    client), at the harness's time (or ``at``); then what `hitl serve`'s card worker finds at its next look at the
    queue (the sweep kicks it) is drawn."""
    assert h.store_url is not None
    env = {
        "HITL_API_URL": "",
        "HITL_TOKEN": "",
        "HITL_STORE": h.store_url,
        "HITL_NOW": str(at if at is not None else h.clock.now()),
    }
    done = await run_hitl(*argv, "--json", env=env)
    await h.rt.ctx.notifier.sweep()
    await h.settle()
    return done


async def pending_card(h: Harness, session: str) -> tuple[Approval, Message]:
    """A refund for one support reviewer, and its card as `hitl serve` posted it (live buttons)."""
    args = {"order_id": "78291", "customer_id": "C-1042", "amount": 120, "reason": "damaged"}
    p = await h.svc.propose(ProposeRequest("refund", args, session_id=session))
    assert p.approval is not None
    card = h.card_for(p.approval.id)
    assert buttons(card) != []
    return p.approval, card


def updates_of(h: Harness, card: Message, since: int) -> list[Any]:
    return [c for c in h.state.calls_to("chat.update")[since:] if c.args.get("ts") == card.ts]


def outcome(card: Message) -> str:
    [block] = [b for b in card.blocks if str(b.get("block_id", "")).startswith("hitl_outcome:")]
    return str(block["text"]["text"])


_DID = {
    "approve": "approved",
    "reject": "rejected",
    "trust": "approved and trusted the tool for this session",
    "modify": "modified and approved",
}
"""What the decided card says each decision did."""


@pytest.mark.parametrize("decision", list(_DID))
async def test_hitl_resume_against_the_store_draws_the_card_once_with_the_decision(
    served: Harness, decision: str
) -> None:
    h = served
    a, card = await pending_card(h, f"ses_{decision}")
    before = len(h.state.calls_to("chat.update"))

    edit = ("--set", "amount=100") if decision == "modify" else ()
    argv = ("resume", a.id, f"--{decision}", *edit, "--reason", "checked", "--as", "U_SUPPORT1")
    code, body, err = await local(h, *argv)
    assert code == (3 if decision == "reject" else 0), (body, err)
    status = Status.REJECTED if decision == "reject" else Status.APPROVED
    assert (await h.rt.store.approvals.get(a.id)).status is status

    assert len(updates_of(h, card, before)) == 1
    card = h.card_for(a.id)
    said, who = outcome(card).split("\n")[:2]
    assert said == (":x: *Rejected*" if decision == "reject" else ":white_check_mark: *Approved*")
    assert who.startswith(f"<@U_SUPPORT1> {_DID[decision]} <!date^") and who.endswith(" via cli-local")
    assert buttons(card) == []  # nothing left to click


async def test_a_refused_local_decision_queues_nothing_and_the_next_one_draws_the_card_once(served: Harness) -> None:
    h = served
    a, card = await pending_card(h, "ses_refused")
    before = len(h.state.calls_to("chat.update"))

    code, body, err = await local(h, "resume", a.id, "--approve", "--as", "U_STRANGER")  # not in the support role
    assert code == 1, (body, err)
    assert (await h.rt.store.approvals.get(a.id)).status is Status.PENDING
    assert updates_of(h, card, before) == []  # no job was queued: the card is not drawn again
    assert buttons(h.card_for(a.id)) == buttons(card)

    code, body, err = await local(h, "resume", a.id, "--approve", "--as", "U_SUPPORT2")
    assert code == 0, (body, err)
    assert len(updates_of(h, card, before)) == 1
    assert buttons(h.card_for(a.id)) == []


async def test_a_group_resume_against_the_store_draws_the_group_card_as_approve_all_does(served: Harness) -> None:
    h = served
    members = await flood(h, 3)
    card = group_message(h)
    assert card.text == "3 × refund from agent:riley: 3 of 3 need approval" and buttons(card) != []
    before = len(h.state.calls_to("chat.update"))

    code, body, err = await local(h, "resume", *(m.id for m in members), "--approve", "--as", "U_SUPPORT1")
    assert code == 0, (body, err)
    assert [(await h.rt.store.approvals.get(m.id)).status for m in members] == [Status.APPROVED] * 3

    card = group_message(h)  # one message for every member, drawn once or twice, not once per member
    assert card.text == "3 × refund from agent:riley: 3 approved" and buttons(card) == []
    assert 1 <= len(updates_of(h, card, before)) < len(members)


async def test_hitl_expire_against_the_store_draws_what_it_expired(served: Harness) -> None:
    h = served
    a, card = await pending_card(h, "ses_expire")
    before = len(h.state.calls_to("chat.update"))

    code, body, err = await local(h, "expire", at=a.expires_at + 1)
    expired = {"expired": [{"approval_id": a.id, "session_id": None, "status": "expired"}]}
    assert code == 0 and body == expired, (body, err)

    assert len(updates_of(h, card, before)) == 1
    card = h.card_for(a.id)
    assert outcome(card).split("\n")[:2] == [":hourglass: *Expired*", "Expired without a decision"]
    assert buttons(card) == []


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_hitl_resume_beside_a_hitl_serve_process_has_that_process_draw_the_card_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Both real processes on one store, on the system clock: the card `hitl serve` posted for an agent's approval
    is drawn again, decided and without buttons, by `hitl serve` alone after `hitl resume --approve` decided it."""
    url = fresh_store_url(backend, request, tmp_path, tag="local")
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=url, config=CONFIG, SHOP_DB=str(tmp_path / "shop.db"))
    try:
        async with serve_process(env, tmp_path):
            store = open_store(url)
            try:
                agent = ApprovalService.from_config(load_config(CONFIG), store=store, clock=SystemClock())
                args = {"order_id": "1", "customer_id": "C-7", "amount": 40}
                asked = await agent.propose(ProposeRequest("refund", args, session_id="s-local"))
            finally:
                await store.close()
            assert asked.approval is not None
            shown = asked.approval.id

            def card() -> Message | None:
                return next((m for m in state.messages if shown in m.text and not m.thread_ts), None)

            posted = await eventually(card, what="the card hitl serve posts")
            assert buttons(posted) != []

            argv = ("resume", shown, "--approve", "--as", "U_SUPPORT1", "--json")
            code, body, err = await run_hitl(*argv, env={**env, "HITL_API_URL": "", "HITL_TOKEN": ""})
            assert code == 0, (body, err)

            def decided_card() -> Message | None:
                m = card()
                return m if m is not None and buttons(m) == [] else None

            drawn = await eventually(decided_card, what="the card drawn decided")
            assert outcome(drawn).startswith(":white_check_mark: *Approved*\n<@U_SUPPORT1> approved <!date^")
        decided = [  # all it drew, up to its exit: the decided card once
            c
            for c in state.calls_to("chat.update")
            if c.args.get("ts") == posted.ts and "hitl_outcome:" in json.dumps(c.args.get("blocks"))
        ]
        assert len(decided) == 1, decided
    finally:
        await emulator.close()


async def test_a_card_update_that_cannot_be_queued_is_said_and_undoes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """After the change is recorded, the store is away (Redis on a port nobody serves): the command is not failed
    by it, and the warning says the card keeps its buttons until it is next drawn (hitl serve's sweep draws no
    decided card again)."""
    store = open_store(f"redis://127.0.0.1:{free_port()}/0")
    clock = FakeClock()
    try:
        a = make_approval(now=clock.now())
        await QueuedCards(store, clock).approval_changed(a, queued=True)
    finally:
        await store.close()
    [said] = [r for r in caplog.records if r.name == "hitl.bot.outbound.queued_cards"]
    assert said.levelname == "WARNING" and said.getMessage().startswith(f"{a.id} is changed (recorded), but its Slack")
    assert "its buttons included, until it is next drawn (hitl serve's sweep draws no decided card" in said.getMessage()
