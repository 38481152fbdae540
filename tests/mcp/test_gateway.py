"""The MCP gateway, end to end: the SDK's client → `hitl mcp` (a process) → a real upstream MCP server (a process)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2

from hitl.bot.views.blocks import card
from hitl.bot.views.evidence import EVIDENCE
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.testing.conformance.adapters import PRACTICE_CONFIG
from tests.mcp.conftest import CLIENTS, Shop, make_shop, text_of
from tests.ports import free_port
from tests.processes import stopped
from tests.slack_text import parsed_text
from tests.waiting import accepts, eventually, started


async def test_tools_resources_and_prompts_come_through_with_their_schemas(shop: Shop) -> None:
    async with shop.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"look_up_order", "refund", "delete_customer", "crash", "send_receipt", "pay"}
        assert tools["refund"].input_schema["required"] == ["order_id", "amount"]
        assert tools["refund"].description == "Refund part or all of an order."
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["shop://policy"]
        read = await client.read_resource("shop://policy")
        assert "30 days" in json.dumps(read.model_dump(mode="json"))
        prompt = await client.get_prompt("apologise", {"name": "Jane"})
        assert "Dear Jane" in json.dumps(prompt.model_dump(mode="json"))


async def test_an_allowed_call_runs_at_once_and_asks_nobody(shop: Shop) -> None:
    async with shop.client() as client:
        result = await client.call_tool("look_up_order", {"order_id": "78291"})
    assert text_of(result) == "order 78291: shipped" and not result.is_error
    assert (await shop.store.approvals.list_pending()).items == []


async def test_a_notify_call_runs_at_once_and_leaves_its_fyi_for_hitl_serve(shop: Shop) -> None:
    async with shop.client() as client:
        result = await client.call_tool("send_receipt", {"order_id": "78291"})
    assert text_of(result) == "receipt sent for 78291" and shop.effects() == ["receipt 78291"]
    [fyi] = await shop.store.jobs.claim("test", kind="fyi", limit=10, now=0.0, lease=60.0)
    assert fyi.payload["tool"] == "send_receipt" and fyi.payload["session_id"] == "desktop-1"


async def test_a_client_that_disconnects_while_waiting_gets_the_decision_on_reconnect(shop: Shop) -> None:
    async with shop.client() as client:
        waiting = asyncio.create_task(client.call_tool("refund", {"order_id": "9", "amount": 15}))
        [approval] = await shop.pending()
        waiting.cancel()  # the client goes away mid-wait (its gateway process ends with the connection)
        await asyncio.gather(waiting, return_exceptions=True)
    assert (await shop.store.approvals.get(approval.id)).status is Status.PENDING  # still open for a reviewer
    await shop.decide(approval, DecisionKind.APPROVE)
    async with shop.client() as client:
        result = await client.call_tool("refund", {"order_id": "9", "amount": 15})
    assert text_of(result) == "refunded 15 on order 9"
    assert shop.effects() == ["refund 9 15"]


async def test_an_approved_call_runs_once_with_progress_while_it_waits(shop: Shop) -> None:
    reported: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, message))

    async with shop.client() as client:
        args: dict[str, Any] = {"order_id": "78291", "amount": 120}
        call = asyncio.create_task(client.call_tool("refund", args, progress_callback=on_progress))
        [approval] = await shop.pending()
        assert approval.tool == "refund" and approval.args == {"order_id": "78291", "amount": 120}
        assert approval.metadata["framework"] == "mcp" and approval.session_id == "desktop-1"
        assert shop.effects() == []  # nothing ran before the decision
        await shop.decide(approval, DecisionKind.APPROVE)
        result = await asyncio.wait_for(call, 30)
        assert text_of(result) == "refunded 120 on order 78291" and not result.is_error
        assert shop.effects() == ["refund 78291 120"]
        assert reported and approval.id in (reported[0][1] or "")
        final = await shop.store.approvals.get(approval.id)
        assert final.status is Status.EXECUTED
        # The identical call again is a new action: it asks again, and nothing runs meanwhile.
        again = asyncio.create_task(client.call_tool("refund", {"order_id": "78291", "amount": 120}))
        pending = await shop.pending()
        assert [a.id for a in pending] != [approval.id]
        await shop.decide(pending[0], DecisionKind.REJECT, reason="already refunded")
        assert "already refunded" in text_of(await asyncio.wait_for(again, 30))
    assert shop.effects() == ["refund 78291 120"]


async def test_a_rejection_answers_with_the_reason_and_nothing_runs(shop: Shop) -> None:
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("refund", {"order_id": "1", "amount": 900}))
        [approval] = await shop.pending()
        await shop.decide(approval, DecisionKind.REJECT, reason="over the customer's order total")
        result = await asyncio.wait_for(call, 30)
    assert result.is_error and "over the customer's order total" in text_of(result)
    assert shop.effects() == []


async def test_a_modified_call_runs_with_the_reviewers_arguments_checked_against_the_upstream_schema(
    shop: Shop,
) -> None:
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("refund", {"order_id": "7", "amount": 90}))
        [approval] = await shop.pending()
        assert approval.args_schema is not None and "amount" in approval.args_schema["properties"]
        try:
            await shop.decide(approval, DecisionKind.MODIFY, args={"order_id": "7", "amount": "lots"})
            raise AssertionError("a modify that fails the upstream schema was accepted")
        except Exception as exc:  # InvalidInput, naming the field
            assert "amount" in str(exc)
        await shop.decide(approval, DecisionKind.MODIFY, args={"order_id": "7", "amount": 40})
        result = await asyncio.wait_for(call, 30)
    assert text_of(result) == "refunded 40 on order 7"
    assert shop.effects() == ["refund 7 40"]


async def test_a_client_that_stopped_waiting_picks_up_the_decision_with_the_same_call(impatient_shop: Shop) -> None:
    shop = impatient_shop
    async with shop.client() as client:
        first = await client.call_tool("refund", {"order_id": "5", "amount": 30})
    assert first.is_error and "pending review" in text_of(first)
    [approval] = await shop.pending()
    assert approval.id in text_of(first) and shop.effects() == []
    await shop.decide(approval, DecisionKind.APPROVE)  # decided while no client is connected
    async with shop.client() as client:  # a new connection, a new gateway process
        second = await client.call_tool("refund", {"order_id": "5", "amount": 30})
    assert text_of(second) == "refunded 30 on order 5"
    assert shop.effects() == ["refund 5 30"]
    assert (await shop.store.approvals.get(approval.id)).status is Status.EXECUTED


async def test_an_upstream_that_dies_mid_call_is_reported_and_not_run_again_blindly(impatient_shop: Shop) -> None:
    shop = impatient_shop
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("crash", {"note": "x"}))
        [approval] = await shop.pending()
        await shop.decide(approval, DecisionKind.APPROVE)
        result = await asyncio.wait_for(call, 30)
        assert result.is_error and "may or may not have acted" in text_of(result)
        assert shop.effects() == ["crash x"]
        again = await client.call_tool("crash", {"note": "x"})  # a person must say so again: it waits
        assert "pending review" in text_of(again)
        # The upstream was started again for the next call; other tools work.
        assert text_of(await client.call_tool("look_up_order", {"order_id": "1"})) == "order 1: shipped"
    assert shop.effects() == ["crash x"]


async def test_a_hostile_tool_description_stays_inert_on_the_card(impatient_shop: Shop) -> None:
    shop = impatient_shop
    async with shop.client() as client:
        await client.call_tool("delete_customer", {"customer_id": "C-9"})
    [approval] = await shop.pending()
    assert "<!channel>" in approval.evidence  # kept as evidence, as the upstream wrote it
    blocks = card(approval, now=approval.created_at)
    parsed = parsed_text(blocks)  # what Slack parses
    assert "<!channel>" not in parsed and "<https://evil.example" not in parsed
    [evidence] = [b for b in blocks if b.get("block_id") == EVIDENCE]  # literal rich text, quoted, last
    assert blocks[-1] is evidence and "<!channel>" in json.dumps(evidence)
    trusted = json.dumps(blocks[:-2])
    assert "APPROVED BY CFO" not in trusted  # only in the labelled evidence part, never beside the controls


@asynccontextmanager
async def http_gateway(shop: Shop, *, flags: tuple[str, ...] = (), **env: str) -> AsyncIterator[int]:
    """`hitl mcp --http` (and ``flags``) as a real process on a free port (its output in mcp.log); yields the port
    once it accepts connections, and stops it after."""
    port = free_port()
    with (shop.tmp / "mcp.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hitl", "mcp", "--http", "--port", str(port), *flags],
            env={**shop.env, **env},
            cwd=shop.tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            await started(lambda: accepts(port), what="hitl mcp --http to listen")
            yield port
        finally:
            await stopped(proc)


async def test_the_gateway_over_streamable_http(shop: Shop) -> None:
    async with http_gateway(shop) as port:
        async with shop.client(http_port=port) as client:
            assert text_of(await client.call_tool("look_up_order", {"order_id": "2"})) == "order 2: shipped"
            call = asyncio.create_task(client.call_tool("refund", {"order_id": "2", "amount": 10}))
            [approval] = await shop.pending()
            await shop.decide(approval, DecisionKind.APPROVE)
            assert text_of(await asyncio.wait_for(call, 30)) == "refunded 10 on order 2"
        assert shop.effects() == ["refund 2 10"]


async def test_the_http_gateway_cuts_off_half_sent_bodies_and_refuses_compressed_ones(shop: Shop) -> None:
    # HITL_BODY_DEADLINE: the same rule, at a test's pace (10 s by default)
    async with http_gateway(shop, HITL_BODY_DEADLINE="1") as port:
        slow = []
        for _ in range(50):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n".encode()
                + b'Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{"jsonrpc": '
            )
            await writer.drain()
            slow.append((reader, writer))
        async with shop.client(http_port=port) as client:  # served meanwhile
            assert text_of(await client.call_tool("look_up_order", {"order_id": "3"})) == "order 3: shipped"
        answers = await asyncio.gather(*(asyncio.wait_for(r.read(), 20) for r, _ in slow))
        assert {a.split(b" ", 2)[1] for a in answers} == {b"408"}, {a[:30] for a in answers}
        assert all(b"did not arrive within 1 s" in a for a in answers)  # cut off by HITL_BODY_DEADLINE
        for _, writer in slow:
            writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n".encode()
            + b"Content-Encoding: deflate\r\nContent-Length: 4\r\n\r\nxxxx"
        )
        assert (await asyncio.wait_for(reader.read(), 20)).split(b" ", 2)[1] == b"415"
        writer.close()
    logged = (shop.tmp / "mcp.log").read_text()
    assert "Traceback" not in logged and "ERROR" not in logged, logged


async def test_a_halt_reaches_the_gateway_process_and_nothing_runs_until_it_is_lifted(shop: Shop) -> None:
    """`hitl halt` given in this process: the gateway (another process) refuses every call within a second and the
    client hears who halted it and why; approving what waits is refused too; after the lift, calls go on."""
    async with shop.client() as client:
        call = asyncio.create_task(client.call_tool("refund", {"order_id": "7", "amount": 20}))
        [waiting] = await shop.pending()
        await shop.service.switch.halt(None, by="U_ADMIN", reason="incident 9")

        async def refused() -> bool:
            result = await client.call_tool("look_up_order", {"order_id": "78291"})
            return bool(result.is_error and "incident 9" in text_of(result))

        await eventually(refused, what="the gateway to obey the halt", timeout=10)
        try:
            await shop.decide(waiting, DecisionKind.APPROVE)
        except Exception as exc:  # refused while halted: Reject is the only way out
            assert "incident 9" in str(exc)
        else:
            raise AssertionError("an approval of a halted tool went through")
        await shop.decide(waiting, DecisionKind.REJECT, reason="halted")
        assert (await asyncio.wait_for(call, 30)).is_error
        await shop.service.switch.lift(None, by="U_ADMIN")

        async def allowed() -> bool:
            return not (await client.call_tool("look_up_order", {"order_id": "78291"})).is_error

        await eventually(allowed, what="the gateway to go on after the lift", timeout=10)
    assert shop.effects() == []  # look_up_order writes nothing; the refund never ran


async def test_a_practice_twin_never_reaches_the_gateways_caller(tmp_path: Path) -> None:
    """Practice approvals through the gateway: the call's approval gets a practice twin; approving the twin runs nothing
    and answers nobody; the client's own call is decided by its own approval."""
    practising = make_shop(tmp_path, wait="20s", extra=PRACTICE_CONFIG)
    try:
        async with practising.client() as client:
            call = asyncio.create_task(client.call_tool("refund", {"order_id": "5", "amount": 30}))
            both = await practising.pending(count=2)
            [real] = [a for a in both if "of" not in a.metadata]
            [twin] = [a for a in both if a.metadata.get("of") == real.id]
            await practising.decide(twin, DecisionKind.APPROVE)  # the planted defect missed: still, nothing runs
            assert practising.effects() == [] and not call.done()
            await practising.decide(real, DecisionKind.REJECT, reason="not this order")
            result = await asyncio.wait_for(call, 30)
        assert result.is_error and "not this order" in text_of(result)
        assert practising.effects() == []
    finally:
        await practising.store.close()


async def test_each_http_client_is_its_own_identity_and_needs_a_token(shop: Shop) -> None:
    """`hitl mcp --http` authenticates every client by its bearer token: a request without one (or with one that may
    not propose) gets 401; each client proposes as its token's identity, so one client's Trust never lets another
    client's calls through, though both use the gateway's session."""
    async with http_gateway(shop) as port:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        async with httpx2.AsyncClient(timeout=30) as raw:
            for token in (None, "not-a-token", CLIENTS["reader"]):
                headers = {"Accept": "application/json, text/event-stream"}
                if token is not None:
                    headers["Authorization"] = f"Bearer {token}"
                answer = await raw.post(f"http://127.0.0.1:{port}/mcp", json=hello, headers=headers)
                assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
            refused = [e for e in await shop.store.audit.entries(limit=100) if e.event == "refused"]
            assert [(e.actor, e.outcome) for e in refused] == [("unauthenticated", "unauthorized")] * 3
            assert "via mcp from 127.0.0.1" in refused[0].detail
        async with shop.client(http_port=port, token=CLIENTS["alice"]) as alice:
            call = asyncio.create_task(alice.call_tool("refund", {"order_id": "4", "amount": 10}))
            [approval] = await shop.pending()
            assert approval.requester == "agent:alice" and approval.session_id == "desktop-1"
            await shop.decide(approval, DecisionKind.TRUST)
            assert text_of(await asyncio.wait_for(call, 30)) == "refunded 10 on order 4"
            # Alice's next refund runs at once: the grant is hers.
            assert text_of(await alice.call_tool("refund", {"order_id": "5", "amount": 11})) == "refunded 11 on order 5"
        async with shop.client(http_port=port, token=CLIENTS["bob"]) as bob:
            call = asyncio.create_task(bob.call_tool("refund", {"order_id": "6", "amount": 12}))
            [asked] = await shop.pending()  # bob, in the same session, is asked about
            assert asked.requester == "agent:bob"
            await shop.decide(asked, DecisionKind.REJECT, reason="not bob's")
            assert (await asyncio.wait_for(call, 30)).is_error
    assert shop.effects() == ["refund 4 10", "refund 5 11"]


async def test_a_flood_past_a_cap_is_a_tool_error_naming_the_code(tmp_path: Path) -> None:
    shop = make_shop(tmp_path, wait="1s", policy="  caps:\n    session: {max: 1, per: 10m}\n")
    try:
        async with shop.client() as client:
            first = await client.call_tool("refund", {"order_id": "5", "amount": 30})
            assert first.is_error and "pending review" in text_of(first)
            flooded = await client.call_tool("refund", {"order_id": "6", "amount": 31})
        assert flooded.is_error and "approval_flood" in text_of(flooded) and "policy.caps.session" in text_of(flooded)
        assert len(await shop.pending()) == 1 and shop.effects() == []
    finally:
        await shop.store.close()


BURST = (
    "  rules:\n"
    "    - {name: receipt_burst, tools: [send_receipt], velocity: {subject: args.order_id, max: 3, window: 1h},"
    " tier: approve, role: support}\n"
)
"""A velocity limit on the gateway's notify tool (it runs without a person, writing to the upstream's ledger)."""


async def test_velocity_counts_every_call_the_gateway_lets_run(tmp_path: Path) -> None:
    """An MCP call has no call id: the same call made 4 times is 4 calls. Under velocity max 3, 3 reach the upstream
    and the 4th waits for a person; rejected, it never runs."""
    limited = make_shop(tmp_path, wait="20s", policy=BURST)
    try:
        async with limited.client() as client:
            for _ in range(3):
                assert text_of(await client.call_tool("send_receipt", {"order_id": "V1"})) == "receipt sent for V1"
            fourth = asyncio.create_task(client.call_tool("send_receipt", {"order_id": "V1"}))
            [asked] = await limited.pending()
            assert (asked.tool, asked.args, asked.rule) == ("send_receipt", {"order_id": "V1"}, "receipt_burst")
            assert limited.effects() == ["receipt V1"] * 3
            await limited.decide(asked, DecisionKind.REJECT, reason="three receipts are enough")
            result = await asyncio.wait_for(fourth, 30)
        assert result.is_error and "three receipts are enough" in text_of(result)
        assert limited.effects() == ["receipt V1"] * 3
    finally:
        await limited.store.close()


async def test_ten_parallel_calls_through_the_gateway_run_exactly_three(tmp_path: Path) -> None:
    """Ten identical calls at once over streamable HTTP: the count is taken atomically with each call's go, so
    exactly 3 reach the upstream; the other 7 share one approval (the same call, unnamed, re-attaches to it), and
    rejecting it answers them all without running any."""
    limited = make_shop(tmp_path, wait="20s", policy=BURST)
    try:
        async with http_gateway(limited) as port, limited.client(http_port=port) as client:
            calls = [asyncio.create_task(client.call_tool("send_receipt", {"order_id": "V2"})) for _ in range(10)]
            [asked] = await limited.pending()
            assert asked.rule == "receipt_burst"
            await limited.decide(asked, DecisionKind.REJECT, reason="too many receipts")
            results = await asyncio.wait_for(asyncio.gather(*calls), 30)
        assert sorted(text_of(r) for r in results if not r.is_error) == ["receipt sent for V2"] * 3
        assert sum(r.is_error for r in results) == 7
        assert limited.effects() == ["receipt V2"] * 3
        assert (await limited.store.approvals.list_pending()).items == []
    finally:
        await limited.store.close()
