"""SlackAsk as Strands' ask callback, and several bot replicas sharing one Redis."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from hitl.adapters.ask_callback import SlackAsk, parse_prompt
from hitl.bot.views.controls import ACTION_APPROVE, ACTION_TRUST
from hitl.engine.agents.ask import Approvals
from hitl.engine.agents.gate import ToolCall
from hitl.engine.domain.models import Status
from hitl.engine.storage import open_store
from hitl.sandbox.webapi import SlackState
from hitl.testing import FakeClock
from tests.backends import SHARED, fresh_store_url
from tests.bot.conftest import Harness, start, stop, workspace
from tests.waiting import eventually

PROMPT = 'Approve "refund"?\n  Input: {"order_id": "78291", "customer_id": "C-1042", "amount": 42}'


def test_parse_strands_prompts_exactly_or_not_at_all() -> None:
    assert parse_prompt(PROMPT) == ("refund", {"order_id": "78291", "customer_id": "C-1042", "amount": 42})
    # Anything but Strands' exact form is unreadable: the caller denies (never files it under another name).
    assert parse_prompt('Approve "rm"?\n  Input: not json') is None
    assert parse_prompt("delete everything now") is None
    assert parse_prompt('Approve "refund" — looks risky?\n  Input: {"amount": 899}') is None
    assert parse_prompt('Approve "refund"?\n  Input: [1, 2]') is None
    assert parse_prompt('Approve "refund, approved by the CFO"?\n  Input: {}') is None


async def wait_for_card(h: Harness, n: int = 1) -> None:
    await eventually(lambda: len(h.cards()) >= n, what=f"{n} cards", interval=0.01)


def button_labels(card: object) -> list[str]:
    blocks = getattr(card, "blocks", None) or []
    return [e["text"]["text"] for b in blocks if b.get("type") == "actions" for e in b["elements"]]


async def test_slack_ask_approves_trusts_and_denies(harness: Harness) -> None:
    ask = SlackAsk(Approvals(harness.svc), session="agent-run-1")
    task = asyncio.create_task(ask(PROMPT))
    await wait_for_card(harness)
    card = harness.cards()[-1]
    # ask() can only answer yes or no: an edit could never reach the tool, so the card offers no Modify
    assert "Modify" not in button_labels(card) and "Approve" in button_labels(card)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(card), ACTION_APPROVE)
    assert await asyncio.wait_for(task, 10) == "y"
    used = (await harness.svc.store.approvals.list_pending()).items
    assert used == []  # handed to the agent and recorded as executed: it authorizes this one execution

    # The identical call again is a new request (one approval, one execution), not a re-attach to the used one.
    again = asyncio.create_task(ask(PROMPT))
    await wait_for_card(harness, 2)
    # Trust approves whatever Strands' enable_trust says ("y", never "t", which its default reads as a denial)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.cards()[-1]), ACTION_TRUST)
    assert await asyncio.wait_for(again, 10) == "y"
    # trusted for this session now: the next refund needs no human and posts no card
    other = 'Approve "refund"?\n  Input: {"order_id": "3", "customer_id": "C", "amount": 6}'
    assert await ask(other) == "y"
    assert len(harness.cards()) == 2
    assert [m.text for m in harness.fyis()] == ["refund ran without review"]  # what the Trust let through is seen

    deny = asyncio.create_task(ask('Approve "delete_customer"?\n  Input: {"customer_id": "C-1042"}'))
    await wait_for_card(harness, 3)
    await harness.slack.command("U_SUPPORT2", "general", f"reject {harness.cards()[-1].text.split('(')[-1][:-1]} no")
    assert await asyncio.wait_for(deny, 10) == "n"


async def test_slack_ask_classifier_prompt_is_denied_not_misfiled(harness: Harness) -> None:
    """Strands' classifier form does not match the exact prompt: denied, and nothing is filed under another name."""
    ask = SlackAsk(Approvals(harness.svc), session="agent-run-2")
    prompt = 'Approve "refund" — refund over policy?\n  Input: {"order_id": "1", "customer_id": "C", "amount": 899}'
    assert await ask(prompt) == "n"
    assert (await harness.svc.store.approvals.list_pending()).items == []
    assert harness.cards() == []


@pytest.mark.parametrize("backend", SHARED)
async def test_replicas_share_cards_decisions_and_wakeups(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two replicas on one shared store (Redis, PostgreSQL): one card, the click served by one wakes the agent
    waiting on the other."""
    url = fresh_store_url(backend, request, tmp_path, tag="rep")
    clock = FakeClock()
    state: SlackState = workspace()
    one = await start(open_store(url), clock, state=state, replica="replica-1")
    two = await start(open_store(url), clock, state=state, replica="replica-2")
    try:
        agent_on_two = SlackAsk(Approvals(two.svc), session="multi")
        waiting = asyncio.create_task(agent_on_two(PROMPT))
        await wait_for_card(one)
        # the same request seen by the other replica (a retry, a restart) never posts a second card
        args = {"order_id": "78291", "customer_id": "C-1042", "amount": 42}
        again = await Approvals(one.svc).gate.check(ToolCall("refund", args, session="multi", framework="ask"))
        assert again.pending and again.approval is not None
        assert len(state.calls_to("chat.postMessage")) == 1
        # the click is served by replica one; the agent waiting on replica two wakes up (pub/sub, NOTIFY)
        await one.slack.click("U_SUPPORT2", copy.deepcopy(one.cards()[-1]), ACTION_APPROVE)
        assert await asyncio.wait_for(waiting, 5) == "y"
        a = await two.svc.store.approvals.get(again.approval.id)
        assert a.status is Status.EXECUTED  # approved, then handed to the agent on replica two
    finally:
        await stop(one)
        await stop(two)
