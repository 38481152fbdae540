"""SlackAsk as Strands' ask callback, and several bot replicas sharing one Redis."""

from __future__ import annotations

import asyncio
import copy
import uuid
from pathlib import Path

from bot.blocks import ACTION_APPROVE, ACTION_TRUST
from engine.ask import Approvals
from engine.domain.models import Status
from engine.storage.redis import RedisStore, connect
from engine.testing import FakeClock
from hitl.adapters.strands import SlackAsk, parse_prompt
from slack_sandbox.webapi import SlackState
from tests.bot.conftest import Harness, start, stop, workspace

PROMPT = 'Approve "refund"?\n  Input: {"order_id": "78291", "customer_id": "C-1042", "amount": 42}'


def test_parse_strands_prompts() -> None:
    assert parse_prompt(PROMPT) == ("refund", {"order_id": "78291", "customer_id": "C-1042", "amount": 42})
    assert parse_prompt('Approve "rm"?\n  Input: not json') == ("rm", {"input": "not json"})
    assert parse_prompt("delete everything now") == ("ask", {"prompt": "delete everything now"})


async def wait_for_card(h: Harness, n: int = 1) -> None:
    for _ in range(500):
        if len(h.cards()) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no card was posted")


async def test_slack_ask_answers_y_t_and_n(harness: Harness) -> None:
    ask = SlackAsk(Approvals(harness.svc), session="agent-run-1")
    task = asyncio.create_task(ask(PROMPT))
    await wait_for_card(harness)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.cards()[-1]), ACTION_APPROVE)
    assert await asyncio.wait_for(task, 10) == "y"

    trust = asyncio.create_task(
        ask(tool="refund", args={"order_id": "2", "customer_id": "C", "amount": 5}, evidence="customer: please hurry")
    )
    await wait_for_card(harness, 2)
    await harness.slack.click("U_SUPPORT1", copy.deepcopy(harness.cards()[-1]), ACTION_TRUST)
    assert await asyncio.wait_for(trust, 10) == "t"
    # trusted for this session now: the next refund needs no human
    assert await ask(tool="refund", args={"order_id": "3", "customer_id": "C", "amount": 6}) == "y"

    deny = asyncio.create_task(ask('Approve "delete_customer"?\n  Input: {"customer_id": "C-1042"}'))
    await wait_for_card(harness, 3)
    await harness.slack.command("U_SUPPORT2", "general", f"reject {harness.cards()[-1].text.split('(')[-1][:-1]} no")
    assert await asyncio.wait_for(deny, 10) == "n"


async def test_replicas_share_cards_decisions_and_wakeups(redis_url: str, tmp_path: Path) -> None:
    prefix = f"rep{uuid.uuid4().hex[:8]}"
    clock = FakeClock()
    state: SlackState = workspace()
    one = await start(RedisStore(connect(redis_url), prefix=prefix), clock, state=state, replica="replica-1")
    two = await start(RedisStore(connect(redis_url), prefix=prefix), clock, state=state, replica="replica-2")
    try:
        agent_on_two = SlackAsk(Approvals(two.svc), session="multi")
        waiting = asyncio.create_task(agent_on_two(PROMPT))
        await wait_for_card(one)
        # the same request seen by the other replica (a retry, a restart) never posts a second card
        again = await one.svc.propose(
            "refund", {"order_id": "78291", "customer_id": "C-1042", "amount": 42}, session_id="multi"
        )
        assert again.approval is not None and not again.created
        assert len(state.calls_to("chat.postMessage")) == 1
        # the click is served by replica one; the agent waiting on replica two wakes up (Redis pub/sub)
        await one.slack.click("U_SUPPORT2", copy.deepcopy(one.cards()[-1]), ACTION_APPROVE)
        assert await asyncio.wait_for(waiting, 5) == "y"
        a = await two.svc.store.approvals.get(again.approval.id)
        assert a.status is Status.APPROVED
    finally:
        await stop(one)
        await stop(two)
