"""``hitl mcp --person-tools``: ``request_approval`` and ``ask_person``, an agent asking a person itself through the
gateway. The SDK's client over streamable HTTP → `hitl mcp --http --person-tools` (a process) → the store a reviewer
decides in."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hitl.bot.views.controls import ACTION_ANSWER, ACTION_APPROVE
from hitl.bot.views.modals import ANSWER_BLOCK
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config, parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode
from hitl.engine.service import ApprovalService
from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.server import start_emulator
from hitl.sandbox.webapi import Message
from tests.bot.conftest import SECRET, serve_env, serve_process, workspace
from tests.bot.hostile import HOSTILE
from tests.bot.test_hostile_text import assert_inert
from tests.mcp.conftest import Shop, make_shop, text_of
from tests.mcp.test_gateway import http_gateway
from tests.waiting import eventually

TRANSFER = """    transfer:
      tier: approve
      role: support
      schema:
        type: object
        properties: {to: {type: string}, amount: {type: number}}
        required: [to, amount]
        additionalProperties: false
"""


@pytest.fixture
async def person_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """The shop with ``transfer`` declared in hitl.yaml with its argument schema (an action no upstream offers)."""
    shop = make_shop(tmp_path, wait="20s")
    config = tmp_path / "hitl.yaml"
    config.write_text(config.read_text().replace("  tools:\n", "  tools:\n" + TRANSFER, 1))
    shop.service = ApprovalService.from_config(load_config(config), store=shop.store, clock=SystemClock())
    yield shop
    await shop.store.close()


async def test_request_approval_asks_as_the_client_and_hands_the_approved_action_over_once(person_shop: Shop) -> None:
    async with http_gateway(person_shop, flags=("--person-tools",)) as port:
        async with person_shop.client(http_port=port) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            offered = tools["request_approval"].input_schema["properties"]["tool"]["enum"]
            assert offered == ["transfer"]  # only a tool hitl.yaml declares with a schema
            asked: dict[str, Any] = {"tool": "transfer", "args": {"to": "ACME", "amount": 120}}
            call = asyncio.create_task(client.call_tool("request_approval", asked))
            [approval] = await person_shop.pending()
            assert approval.tool == "transfer" and approval.requester == "agent:alice"  # the token, not an argument
            await person_shop.decide(approval, DecisionKind.MODIFY, args={"to": "ACME", "amount": 100})
            result = await asyncio.wait_for(call, 60)
            assert not result.is_error
            assert result.structured_content == {
                "tool": "transfer",
                "approval_id": approval.id,
                "decision": "approved",
                "args": {"to": "ACME", "amount": 100},
            }
            assert (await person_shop.store.approvals.get(approval.id)).status is Status.EXECUTED  # handed over once
            # A no is an answer too, with the reviewer's reason.
            again = asyncio.create_task(
                client.call_tool("request_approval", {**asked, "args": {"to": "X", "amount": 9}})
            )
            [second] = await person_shop.pending()
            await person_shop.decide(second, DecisionKind.REJECT, reason="not a vendor of ours")
            no = await asyncio.wait_for(again, 60)
            assert no.structured_content is not None and no.structured_content["decision"] == "rejected"
            assert "not a vendor of ours" in no.structured_content["reason"]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"tool": "transfer", "args": {"to": "ACME", "amount": "lots"}}, "amount"),
        ({"tool": "transfer", "args": {"to": "ACME", "amount": 1}, "requester": "U_SUPPORT1"}, "exactly {tool, args}"),
        ({"tool": "refund", "args": {"order_id": "1", "amount": 5}}, "declares with an argument schema"),
    ],
)
async def test_request_approval_refuses_what_hitl_yaml_does_not_declare(
    person_shop: Shop, arguments: dict[str, Any], says: str
) -> None:
    async with http_gateway(person_shop, flags=("--person-tools",)) as port:
        async with person_shop.client(http_port=port) as client:
            result = await client.call_tool("request_approval", arguments)
    assert result.is_error and says in text_of(result)
    assert (await person_shop.store.approvals.list_pending()).items == []


ASK = "mcp:\n  ask_person: {role: support, max_chars: 200}\n"
QUESTION = "\n".join([*HOSTILE[:18], HOSTILE[-1]])
"""A question of hostile text (mentions, links, fake verdicts and buttons, a null byte): every byte the asker's."""


@pytest.fixture
async def asking_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """The shop with ``mcp.ask_person`` in hitl.yaml: questions the support role answers, in 200 characters."""
    shop = make_shop(tmp_path, wait="20s")
    config = tmp_path / "hitl.yaml"
    config.write_text(config.read_text().replace("mcp:\n", ASK, 1))
    shop.service = ApprovalService.from_config(load_config(config), store=shop.store, clock=SystemClock())
    yield shop
    await shop.store.close()


def answer_values(text: str) -> dict[str, Any]:
    """What Slack sends back for the answer form's one input."""
    return {ANSWER_BLOCK: {"value": {"type": "plain_text_input", "value": text}}}


async def test_ask_person_is_answered_in_slack_and_the_answer_returned_once(asking_shop: Shop) -> None:
    """The SDK's client asks over `hitl mcp --http --person-tools`; `hitl serve` posts the question on a card (the
    question inert, the asker the token's identity); a signed Answer form records the answer through the decide
    path; the call returns it, handed over once."""
    shop = asking_shop
    state = workspace()
    emulator = await start_emulator(state)
    env = serve_env(state, emulator, store=shop.env["HITL_STORE"], config=shop.tmp / "hitl.yaml")
    http = aiohttp.ClientSession()
    try:
        async with serve_process(env, shop.tmp) as serve_port, http_gateway(shop, flags=("--person-tools",)) as port:
            async with shop.client(http_port=port) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert set(tools["ask_person"].input_schema["properties"]) == {"question"}
                assert "ask_person" not in tools["request_approval"].input_schema["properties"]["tool"]["enum"]
                call = asyncio.create_task(client.call_tool("ask_person", {"question": QUESTION}))
                [approval] = await shop.pending()
                assert approval.tool == "ask_person" and approval.requester == "agent:alice"
                assert approval.args == {"question": QUESTION}

                def posted() -> Message | None:
                    return next((m for m in state.messages if approval.id in m.text and not m.thread_ts), None)

                card = copy.deepcopy(await eventually(posted, what="the question's card"))
                assert_inert(card.blocks)
                buttons = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
                assert ACTION_ANSWER in buttons and ACTION_APPROVE not in buttons  # answered, never just approved
                slack = Dispatcher(
                    state, http, bot_url=f"http://127.0.0.1:{serve_port}/slack/events", signing_secret=SECRET
                )
                assert (await slack.click("U_SUPPORT1", card, ACTION_ANSWER)).status == 200
                view_id = await eventually(lambda: next(iter(state.views), None), what="the answer form")
                form = state.views[view_id]
                assert form["callback_id"] == "hitl_answer_submit"
                [field] = [b for b in form["blocks"] if b["type"] == "input"]
                assert field["element"]["max_length"] == 200
                too_long = await slack.submit("U_SUPPORT1", view_id, answer_values("x" * 201))
                assert too_long.json()["response_action"] == "errors"  # the engine's bound, said under the input
                assert (await shop.store.approvals.get(approval.id)).status is Status.PENDING
                answer = "Yes: <!channel> ship it *today*"
                sent = await slack.submit("U_SUPPORT1", view_id, answer_values(answer))
                assert sent.status == 200 and sent.body.strip() == ""
                result = await asyncio.wait_for(call, 60)
                assert not result.is_error, text_of(result)
                assert result.structured_content == {
                    "approval_id": approval.id,
                    "decision": "answered",
                    "answer": answer,
                }
                done = await shop.store.approvals.get(approval.id)
                assert done.status is Status.EXECUTED  # handed over once
                [decided] = [d for d in done.decisions]
                assert (
                    decided.kind is DecisionKind.MODIFY and decided.reviewer == "U_SUPPORT1" and decided.via == "slack"
                )
                audit = [e.event for e in await shop.store.audit.entries(approval_id=approval.id)]
                assert audit.count("decided") == 1

                def answered_card() -> Message | None:
                    m = next(m for m in state.messages if m.ts == card.ts and m.channel == card.channel)
                    return m if answer in json.dumps(m.blocks, ensure_ascii=False) else None

                shown = await eventually(answered_card, what="the card updated with the answer")
                assert_inert(shown.blocks)  # the answer shown as the reviewer's text, boxed like the question
    finally:
        await http.close()
        await emulator.close()


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"question": "Ship it?", "requester": "U_SUPPORT1"}, "exactly {question}"),
        ({"question": "Ship it?", "answer": "yes"}, "exactly {question}"),
        ({"question": ""}, "question"),
        ({"question": "Q" * 4001}, "question"),
    ],
)
async def test_ask_person_takes_the_question_alone(asking_shop: Shop, arguments: dict[str, Any], says: str) -> None:
    """A requester or an answer among the arguments is refused (the asker is the MCP principal), and so is an empty
    or over-long question; nothing is asked."""
    async with http_gateway(asking_shop, flags=("--person-tools",)) as port:
        async with asking_shop.client(http_port=port) as client:
            result = await client.call_tool("ask_person", arguments)
    assert result.is_error and says in text_of(result)
    assert (await asking_shop.store.approvals.list_pending()).items == []


async def test_ask_person_is_not_served_without_mcp_ask_person(person_shop: Shop) -> None:
    async with http_gateway(person_shop, flags=("--person-tools",)) as port:
        async with person_shop.client(http_port=port) as client:
            assert "ask_person" not in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("ask_person", {"question": "Ship it?"})
    assert result.is_error and "no mcp.ask_person" in text_of(result)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "roles: {support: [U1]}\npolicy: {tools: {ask_person: {tier: auto}}}\nmcp: {ask_person: {role: support}}",
            "policy.tools.ask_person is reserved for mcp.ask_person",
        ),
        ("mcp: {ask_person: {role: nobody}}", "not defined under 'roles': nobody"),
        ("mcp: {ask_person: {max_chars: 0}}", "mcp.ask_person.max_chars"),
    ],
)
def test_mcp_ask_person_is_checked_when_hitl_yaml_loads(text: str, says: str) -> None:
    """A hand-made tool of the reserved name (it could be set to run without a person), a role nobody defined and
    an answer of no length are refused with the file, not found out when a question comes."""
    with pytest.raises(EngineError, match="policy_invalid") as refused:
        parse_config(text)
    assert says in refused.value.message


async def test_the_person_a_request_approval_client_acts_for_never_approves_it(person_shop: Shop) -> None:
    """A client token acting for a reviewer of the tool's role: its request_approval records that person, who is
    then the one reviewer of the role who may not decide it (separation of duties); another one decides."""
    config = person_shop.tmp / "hitl.yaml"
    own = 'reviewer: "agent:alice", scopes: [propose], acts_for: U_SUPPORT1'
    config.write_text(config.read_text().replace('reviewer: "agent:alice", scopes: [propose]', own))
    person_shop.service = ApprovalService.from_config(load_config(config), store=person_shop.store, clock=SystemClock())
    async with http_gateway(person_shop, flags=("--person-tools",)) as port:
        async with person_shop.client(http_port=port) as client:
            asked: dict[str, Any] = {"tool": "transfer", "args": {"to": "ACME", "amount": 70}}
            call = asyncio.create_task(client.call_tool("request_approval", asked))
            [approval] = await person_shop.pending()
            assert approval.on_behalf_of == "U_SUPPORT1"
            with pytest.raises(DecisionRefused) as refused:
                await person_shop.decide(approval, DecisionKind.APPROVE)  # U_SUPPORT1, the person behind the call
            assert refused.value.code is ErrorCode.SELF_APPROVAL
            await person_shop.service.decide(DecideRequest(approval.id, "U_SUPPORT2", DecisionKind.APPROVE, via="api"))
            result = await call
    assert result.structured_content is not None and result.structured_content["decision"] == "approved"
