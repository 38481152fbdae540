"""``hitl mcp --person-tools``: ``request_approval``, an agent asking a person itself through the gateway. The SDK's
client over streamable HTTP → `hitl mcp --http --person-tools` (a process) → the store a reviewer decides in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, ErrorCode
from hitl.engine.service import ApprovalService
from tests.mcp.conftest import Shop, make_shop, text_of
from tests.mcp.test_gateway import http_gateway

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
