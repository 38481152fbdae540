"""Tier ``self`` through `hitl mcp` (issue 68), with the SDK's client: over streamable HTTP the person the client's
token acts for (its ``acts_for``) confirms the call and nobody else may; over stdio no one is authenticated, so the
call is asked of the tool's role as ``approve``. (The 2026-07-28 form elicitation: test_own_form.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind, Status, Tier
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.errors import DecisionRefused, ErrorCode
from hitl.engine.service import ApprovalService
from tests.mcp.conftest import CLIENTS, Shop, make_shop, text_of
from tests.mcp.test_gateway import http_gateway

ALICE = "U_ALICE"
BOB = "U_BOB"


def at_tier_self(shop: Shop, *more: tuple[str, str]) -> None:
    """Put ``shop``'s ``send_receipt`` at tier self with alice's client token acting for :data:`ALICE` (then each
    of ``more``, an (old, new) pair, replaced in its hitl.yaml), and rebuild its service on that hitl.yaml."""
    config = shop.tmp / "hitl.yaml"
    text = config.read_text().replace("send_receipt: {tier: notify}", "send_receipt: {tier: self, role: support}")
    text = text.replace(
        'reviewer: "agent:alice", scopes: [propose]', f'reviewer: "agent:alice", scopes: [propose], acts_for: {ALICE}'
    )
    for old, new in more:
        text = text.replace(old, new)
    config.write_text(text)
    shop.service = ApprovalService.from_config(load_config(config), store=shop.store, clock=SystemClock())


@pytest.fixture
async def own_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """The gateway's world with ``send_receipt`` at tier self and alice's client token acting for :data:`ALICE`."""
    shop = make_shop(tmp_path, wait="20s")
    at_tier_self(shop)
    yield shop
    await shop.store.close()


async def test_over_http_the_person_the_token_acts_for_confirms(own_shop: Shop) -> None:
    async with http_gateway(own_shop) as port, own_shop.client(http_port=port) as alice:
        call = asyncio.create_task(alice.call_tool("send_receipt", {"order_id": "7", "requester": "U_SUPPORT1"}))
        [asked] = await own_shop.pending()
        assert (asked.tier, asked.on_behalf_of, asked.requester) == (Tier.SELF, ALICE, "agent:alice")
        with pytest.raises(DecisionRefused) as refused:  # a reviewer of the tool's role, named in the arguments too
            await own_shop.decide(asked, DecisionKind.APPROVE)
        assert refused.value.code is ErrorCode.NOT_ELIGIBLE and "not yours" in refused.value.message
        done = await own_shop.service.decide(DecideRequest(asked.id, ALICE, DecisionKind.APPROVE, via="api"))
        assert done.status is Status.APPROVED
        assert text_of(await asyncio.wait_for(call, 30)) == "receipt sent for 7"
    assert own_shop.effects() == ["receipt 7"]


async def test_over_stdio_nobody_is_known_so_the_role_approves(own_shop: Shop) -> None:
    async with own_shop.client() as client:
        call = asyncio.create_task(client.call_tool("send_receipt", {"order_id": "8"}))
        [asked] = await own_shop.pending()
        assert (asked.tier, asked.rule, asked.required_role, asked.on_behalf_of) == (
            Tier.APPROVE,
            "self_without_person",
            "support",
            None,
        )
        await own_shop.decide(asked, DecisionKind.APPROVE)
        assert text_of(await asyncio.wait_for(call, 30)) == "receipt sent for 8"


async def test_a_persons_confirmation_reaches_no_call_made_for_another_person(tmp_path: Path) -> None:
    """Two clients of one agent identity, each token acting for its own person: the same call made for bob is never
    attached to the approval alice confirmed (it would run for bob on alice's word), it is asked of bob."""
    shop = make_shop(tmp_path, wait="1s")
    same_agent_for_bob = (  # bob's token: the same agent identity, acting for bob
        'reviewer: "agent:bob", scopes: [propose]',
        f'reviewer: "agent:alice", scopes: [propose], acts_for: {BOB}',
    )
    at_tier_self(shop, same_agent_for_bob)
    try:
        async with http_gateway(shop) as port:
            async with shop.client(http_port=port) as alice:
                assert "pending review" in text_of(await alice.call_tool("send_receipt", {"order_id": "9"}))
            [asked] = await shop.pending()
            assert asked.on_behalf_of == ALICE
            await shop.service.decide(DecideRequest(asked.id, ALICE, DecisionKind.APPROVE, via="api"))
            async with shop.client(http_port=port, token=CLIENTS["bob"]) as bob:
                answer = text_of(await bob.call_tool("send_receipt", {"order_id": "9"}))
            assert "pending review" in answer and asked.id not in answer
            assert shop.effects() == []
            [for_bob] = await shop.pending()
            assert (for_bob.tier, for_bob.on_behalf_of, for_bob.requester) == (Tier.SELF, BOB, "agent:alice")
            async with shop.client(http_port=port) as alice:
                assert text_of(await alice.call_tool("send_receipt", {"order_id": "9"})) == "receipt sent for 9"
        assert shop.effects() == ["receipt 9"]
    finally:
        await shop.store.close()
