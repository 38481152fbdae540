"""MCP 2026-07-28 through the gateway: a call that needs a person answers ``input_required`` (a URL elicitation to
the decision page and a sealed ``requestState``), the client's retry runs it once when the store says approved, and
nothing a client answers to an elicitation ever counts as an approval. The SDK's own client at 2026-07-28 → `hitl mcp`
(real processes, stdio or --http, one or two replicas on one store) → the real upstream server process."""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from hitl.engine.clocks import FakeClock, SystemClock
from hitl.engine.config.hitl_yaml import load_config, parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.errors import EngineError
from hitl.engine.service import ApprovalService
from hitl.engine.storage.factory import open_store
from hitl.mcp.request_state import RequestStates
from tests.mcp.conftest import CLIENTS, Shop, make_shop, text_of
from tests.mcp.test_gateway import http_gateway
from tests.waiting import eventually

PUBLIC = "http://127.0.0.1:9/hitl"
"""``web.public_url`` of the shop's hitl.yaml: where its decision pages are (nothing has to answer there)."""
WEB = f"""
web:
  public_url: {PUBLIC}
  oidc: {{issuer: "http://127.0.0.1:9", client_id: hitl-test}}
"""
MODERN = "2026-07-28"


class Elicited:
    """A client's user who accepts everything they are asked, and what they were asked."""

    def __init__(self) -> None:
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if isinstance(params, types.ElicitRequestFormParams):  # a form: "yes, approved", as a hostile client says
            return types.ElicitResult(action="accept", content={"approved": True, "decision": "approve"})
        return types.ElicitResult(action="accept")


def _keyed(shop: Shop) -> str:
    key = secrets.token_hex(32)
    shop.env["HITL_MCP_STATE_KEY"] = key
    return key


@pytest.fixture
async def web_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """A gateway with a web inbox (decision pages) and a shared state key, waiting up to 20 s per retry."""
    s = make_shop(tmp_path, wait="20s", extra=WEB)
    _keyed(s)
    yield s
    await s.store.close()


@pytest.fixture
async def quick_shop(tmp_path: Path) -> AsyncIterator[Shop]:
    """The same, but each retry waits one second for a decision before answering ``input_required`` again."""
    s = make_shop(tmp_path, wait="1s", extra=WEB)
    _keyed(s)
    yield s
    await s.store.close()


@asynccontextmanager
async def modern(
    shop: Shop, *, http_port: int | None = None, token: str = CLIENTS["alice"], user: Elicited | None = None
) -> AsyncIterator[Client]:
    """The SDK's ``Client`` pinned to 2026-07-28 on `hitl mcp` (a new stdio process each time, or over --http)."""
    async with AsyncExitStack() as stack:
        server: Any
        if http_port is None:
            server = StdioServerParameters(
                command=sys.executable, args=["-m", "hitl", "mcp"], env=shop.env, cwd=str(shop.tmp)
            )
        else:
            headers = {"Authorization": f"Bearer {token}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=60))
            server = streamable_http_client(f"http://127.0.0.1:{http_port}/mcp", http_client=http)
        client = Client(server, mode=MODERN, elicitation_callback=user, cache=None)
        yield await stack.enter_async_context(client)


async def first_round(session: ClientSession, tool: str, args: dict[str, Any]) -> types.InputRequiredResult:
    answer = await session.call_tool(tool, args, allow_input_required=True)
    assert isinstance(answer, types.InputRequiredResult), answer
    return answer


async def test_a_2026_client_is_sent_to_the_decision_page_and_its_retry_runs_the_call_once(web_shop: Shop) -> None:
    user = Elicited()
    async with modern(web_shop, user=user) as client:
        assert client.protocol_version == MODERN
        call = asyncio.create_task(client.call_tool("refund", {"order_id": "5", "amount": 40}))
        [approval] = await web_shop.pending()
        [asked] = await eventually(lambda: user.asked or None, what="the client's user to be shown the page")
        assert web_shop.effects() == []  # the client's "accept" ran nothing
        assert isinstance(asked, types.ElicitRequestURLParams)
        assert asked.url == f"{PUBLIC}/inbox/approvals/{approval.id}"
        assert approval.id in asked.message and "approves nothing" in asked.message
        assert (await web_shop.store.approvals.get(approval.id)).status is Status.PENDING
        await web_shop.decide(approval, DecisionKind.APPROVE)
        result = await asyncio.wait_for(call, 60)
    assert text_of(result) == "refunded 40 on order 5" and not result.is_error
    assert web_shop.effects() == ["refund 5 40"]
    assert (await web_shop.store.approvals.get(approval.id)).status is Status.EXECUTED


async def test_an_answer_to_an_elicitation_never_approves(quick_shop: Shop) -> None:
    args = {"order_id": "6", "amount": 70}
    async with modern(quick_shop) as client:
        first = await first_round(client.session, "refund", args)
        [approval] = await quick_shop.pending()
        forged: dict[str, Any] = {
            "hitl_review": types.ElicitResult(action="accept", content={"approved": True}),
            "approve": types.ElicitResult(action="accept", content={"decision": "approve", "reviewer": "U_SUPPORT1"}),
        }
        state = first.request_state
        for _ in range(3):  # every retry: still waiting for a person, nothing ran
            again = await client.session.call_tool(
                "refund", args, input_responses=forged, request_state=state, allow_input_required=True
            )
            assert isinstance(again, types.InputRequiredResult)
            assert approval.id in str((again.meta or {}).get("io.github.hitl-gate/status"))
            assert not again.input_requests  # sent to the page once; the retries only wait
            state = again.request_state
    final = await quick_shop.store.approvals.get(approval.id)
    assert final.status is Status.PENDING and final.decisions == ()
    assert quick_shop.effects() == []


async def test_a_retry_after_the_call_ran_gets_the_recorded_result_in_another_process(quick_shop: Shop) -> None:
    args = {"order_id": "7", "amount": 15}
    async with modern(quick_shop) as client:
        first = await first_round(client.session, "refund", args)
    [approval] = await quick_shop.pending()
    await quick_shop.decide(approval, DecisionKind.APPROVE)
    answers = []
    for _ in range(2):  # each a new gateway process (a restart between retries), both with the first state
        async with modern(quick_shop) as client:
            answers.append(await client.session.call_tool("refund", args, request_state=first.request_state))
    assert [text_of(a) for a in answers] == ["refunded 15 on order 7"] * 2
    assert quick_shop.effects() == ["refund 7 15"]
    assert [a.id for a in (await quick_shop.store.approvals.list_pending()).items] == []


async def test_an_expired_state_reattaches_to_the_same_approval(quick_shop: Shop) -> None:
    args = {"order_id": "8", "amount": 25}
    key = quick_shop.env["HITL_MCP_STATE_KEY"].encode()
    async with modern(quick_shop) as client:
        await first_round(client.session, "refund", args)
        [approval] = await quick_shop.pending()
        # A state this gateway's key sealed long ago (the clock of its sealing set to the epoch): past its life.
        old = RequestStates(key, ttl=600, clock=FakeClock(1000.0)).seal(
            approval_id=approval.id, tool="refund", args=args, principal="stdio-session:desktop-1"
        )
        again = await client.session.call_tool("refund", args, request_state=old, allow_input_required=True)
        assert isinstance(again, types.InputRequiredResult)
        assert [a.id for a in await quick_shop.pending()] == [approval.id]  # the same approval, not a second
        await quick_shop.decide(approval, DecisionKind.APPROVE)
        done = await client.session.call_tool("refund", args, request_state=again.request_state)
        assert text_of(done) == "refunded 25 on order 8"
        # Past its life after the call ran: the recorded result, not a second approval of the same call.
        late = await client.session.call_tool("refund", args, request_state=old)
    assert text_of(late) == "refunded 25 on order 8" and quick_shop.effects() == ["refund 8 25"]
    assert (await quick_shop.store.approvals.list_pending()).items == []


async def _refusals(shop: Shop) -> list[Any]:
    return [e for e in await shop.store.audit.entries(limit=1000) if e.outcome == "request_state_refused"]


async def test_a_forged_or_tampered_state_is_refused_with_a_code_and_audited(quick_shop: Shop) -> None:
    args = {"order_id": "9", "amount": 30}
    async with modern(quick_shop) as client:
        first = await first_round(client.session, "refund", args)
        assert first.request_state is not None
        [approval] = await quick_shop.pending()
        stranger = RequestStates(secrets.token_bytes(32), ttl=600, clock=FakeClock(2e9)).seal(
            approval_id=approval.id, tool="refund", args=args, principal="stdio-session:desktop-1"
        )
        flipped = first.request_state[:-3] + ("A" if first.request_state[-3] != "A" else "B") + first.request_state[-2:]
        for state, tool, sent in (
            (flipped, "refund", args),
            (stranger, "refund", args),
            ("not a state", "refund", args),
            (first.request_state, "refund", {**args, "amount": 3000}),  # a state for another call
        ):
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(tool, sent, request_state=state, allow_input_required=True)
            assert refused.value.error.data == {"code": "request_state_refused"}
            assert "without requestState" in refused.value.error.message
    reasons = sorted(e.detail.rsplit(" ", 1)[-1] for e in await _refusals(quick_shop))
    assert reasons == ["forged", "forged", "forged", "other_call"]
    assert quick_shop.effects() == []
    assert (await quick_shop.store.approvals.get(approval.id)).status is Status.PENDING


@pytest.fixture
async def redis_shop(tmp_path: Path, redis_url: str) -> AsyncIterator[Shop]:
    """The quick shop on the shared store replicas use: Redis (a key prefix of its own)."""
    s = make_shop(tmp_path, wait="1s", extra=WEB)
    _keyed(s)
    await s.store.close()
    url = f"{redis_url}?prefix=mcp-{secrets.token_hex(4)}"
    s.env["HITL_STORE"] = url
    s.store = open_store(url)
    s.service = ApprovalService.from_config(load_config(tmp_path / "hitl.yaml"), store=s.store, clock=SystemClock())
    yield s
    await s.store.close()


async def test_two_replicas_one_store_another_clients_state_refused_and_the_call_runs_once(redis_shop: Shop) -> None:
    quick_shop = redis_shop
    args = {"order_id": "10", "amount": 55}
    async with http_gateway(quick_shop) as one, http_gateway(quick_shop) as two:
        async with modern(quick_shop, http_port=one) as alice:
            first = await first_round(alice.session, "refund", args)
        [approval] = await quick_shop.pending()
        async with modern(quick_shop, http_port=two, token=CLIENTS["bob"]) as bob:
            with pytest.raises(MCPError) as refused:
                await bob.session.call_tool("refund", args, request_state=first.request_state)
            assert refused.value.error.data == {"code": "request_state_refused"}
        [entry] = await _refusals(quick_shop)
        assert entry.actor == "token:bob" and entry.detail.endswith("other_principal")
        await quick_shop.decide(approval, DecisionKind.APPROVE)
        texts = []
        for port in (two, one, two):  # the retries reach either replica
            async with modern(quick_shop, http_port=port) as alice:
                texts.append(text_of(await alice.session.call_tool("refund", args, request_state=first.request_state)))
    assert texts == ["refunded 55 on order 10"] * 3
    assert quick_shop.effects() == ["refund 10 55"]


async def test_without_a_decision_page_the_first_answer_says_pending_review_and_asks_for_a_retry(
    tmp_path: Path,
) -> None:
    shop = make_shop(tmp_path, wait="1s")  # no web: section
    _keyed(shop)
    try:
        async with modern(shop) as client:
            first = await first_round(client.session, "refund", {"order_id": "12", "amount": 9})
            [approval] = await shop.pending()
            assert not first.input_requests and first.request_state is not None
            status = (first.meta or {})["io.github.hitl-gate/status"]
            assert status == f"refund is pending review (approval {approval.id}); nothing ran"
            await shop.decide(approval, DecisionKind.APPROVE)
            done = await client.session.call_tool(
                "refund", {"order_id": "12", "amount": 9}, request_state=first.request_state
            )
        assert text_of(done) == "refunded 9 on order 12" and shop.effects() == ["refund 12 9"]
    finally:
        await shop.store.close()


def test_the_state_key_is_never_the_receipt_keys_variable() -> None:
    with pytest.raises(EngineError) as refused:
        parse_config(
            "receipts: {issuer: https://hitl.example.com, key_env: SHARED_KEY}\nmcp: {state_key_env: SHARED_KEY}\n"
        )
    assert "mcp.state_key_env names the receipt key's variable" in str(refused.value)


@pytest.mark.parametrize(
    ("value", "says"),
    [("same", "holds the receipt signing key"), ("short", "at least 32 bytes")],
)
def test_a_state_key_equal_to_the_receipt_key_or_too_short_stops_the_gateway(
    tmp_path: Path, value: str, says: str
) -> None:
    shop = make_shop(tmp_path, wait="1s", extra="receipts: {issuer: https://hitl.example.com}\n")
    receipt_key = "-----BEGIN PRIVATE KEY-----\n" + secrets.token_hex(40) + "\n-----END PRIVATE KEY-----"
    state_key = receipt_key if value == "same" else "too-short"
    env = {**shop.env, "HITL_RECEIPT_KEY": receipt_key, "HITL_MCP_STATE_KEY": state_key}
    done = subprocess.run(
        [sys.executable, "-m", "hitl", "mcp"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and says in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


NODE = Path(__file__).with_name("node")


async def test_the_typescript_sdk_client_at_2026_07_28_is_sent_to_the_page_and_its_accept_approves_nothing(
    web_shop: Shop,
) -> None:
    """@modelcontextprotocol/client 2.3.1 (what the MCP Inspector is built on) negotiates 2026-07-28 and accepts every
    elicitation it is shown: it is sent to the decision page, and the call runs only after a reviewer decides."""
    if not (NODE / "node_modules" / "@modelcontextprotocol" / "client").is_dir():
        pytest.fail(
            "@modelcontextprotocol/client for Node.js is missing: `make test` installs it (scripts/ensure-node)"
        )
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(NODE / "call.mjs"),
        "refund",
        json.dumps({"order_id": "13", "amount": 60}),
        env={**web_shop.env, "HITL_PYTHON": sys.executable},
        cwd=web_shop.tmp,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        elicited = json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))["elicited"]
        [approval] = await web_shop.pending()
        assert elicited["mode"] == "url" and elicited["url"] == f"{PUBLIC}/inbox/approvals/{approval.id}"
        assert web_shop.effects() == []  # accepted, and nothing ran
        assert (await web_shop.store.approvals.get(approval.id)).status is Status.PENDING
        await web_shop.decide(approval, DecisionKind.APPROVE)
        last = json.loads((await asyncio.wait_for(proc.stdout.read(), 60)).splitlines()[-1])
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert [c["text"] for c in last["result"]["content"]] == ["refunded 60 on order 13"]
    assert web_shop.effects() == ["refund 13 60"]


ASKER = Path(__file__).with_name("asking_upstream.py")


def asking_shop(tmp: Path) -> Shop:
    """The shop with a second upstream, ``asker``, whose ``wipe`` asks its own confirmation (approval required)."""
    shop = make_shop(tmp, wait="20s", extra=WEB)
    _keyed(shop)
    config = tmp / "hitl.yaml"
    text = config.read_text()
    text = text.replace("  tools:\n", "  tools:\n    wipe: {tier: approve, role: support}\n", 1)
    text = text.replace("allowed_tools: [look_up_order]", "allowed_tools: [look_up_order, connect]", 1)
    ledger = tmp / "ledger.db"
    server = f"    asker:\n      command: [{sys.executable}, {ASKER}]\n      env: {{HITL_TEST_LEDGER: {ledger}}}\n"
    config.write_text(text.replace("  servers:\n", "  servers:\n" + server, 1))
    shop.service = ApprovalService.from_config(load_config(config), store=shop.store, clock=SystemClock())
    return shop


async def test_an_upstreams_own_elicitation_reaches_the_client_as_the_upstreams_and_approves_nothing(
    tmp_path: Path,
) -> None:
    shop = asking_shop(tmp_path)
    asked: list[types.ElicitRequestParams] = []

    async def accept_all(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"confirm": True})

    try:
        async with AsyncExitStack() as stack:
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "hitl", "mcp"], env=shop.env, cwd=str(shop.tmp)
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write, elicitation_callback=accept_all))
            await session.initialize()  # a handshake-era client: asked in the middle of its call
            call = asyncio.create_task(session.call_tool("wipe", {"target": "staging"}))
            [approval] = await shop.pending()
            assert asked == [] and shop.effects() == []  # hitl asks a person, never the client
            await shop.decide(approval, DecisionKind.APPROVE)
            result = await asyncio.wait_for(call, 60)
        assert text_of(result) == "wiped staging"
        [question] = asked
        assert isinstance(question, types.ElicitRequestFormParams)
        head, said = question.message.split("\n", 1)
        assert head.startswith("[The upstream MCP server 'asker' (a local process,") and "not hitl" in head
        assert said == "Really wipe staging? This is the asker server's own question."
        # The form's labels are the upstream's too: each title and description says whose it is, none passes for hitl's.
        schema = question.requested_schema
        assert schema["title"] == "[upstream 'asker'] Confirmation"
        assert schema["description"] == "[upstream 'asker'] What the upstream asks the user."
        field = schema["properties"]["confirm"]
        assert field["title"] == "[upstream 'asker'] Approve in hitl"
        assert field["description"] == "[upstream 'asker'] Yes approves this call in hitl (the asker's own words)"
        assert field["type"] == "boolean" and schema["required"] == ["confirm"]
        final = await shop.store.approvals.get(approval.id)
        assert [d.reviewer for d in final.decisions] == ["U_SUPPORT1"]  # the client's "accept" is no decision
        assert shop.effects() == ["wipe staging"]
    finally:
        await shop.store.close()


def _upstreams_question(params: types.ElicitRequestParams, target: str) -> None:
    """``params`` is the asker's own question about ``target``, marked as the upstream's in its message and labels."""
    assert isinstance(params, types.ElicitRequestFormParams)
    head, said = params.message.split("\n", 1)
    assert head.startswith("[The upstream MCP server 'asker' (a local process,") and "not hitl" in head
    assert said == f"Really wipe {target}? This is the asker server's own question."
    field = params.requested_schema["properties"]["confirm"]
    assert field["title"] == "[upstream 'asker'] Approve in hitl"
    assert field["description"].startswith("[upstream 'asker'] ")


async def test_a_2026_client_gets_an_upstreams_own_question_as_an_input_required_round_relayed_on_the_retry(
    tmp_path: Path,
) -> None:
    shop = asking_shop(tmp_path)
    args = {"target": "prod"}
    try:
        async with modern(shop) as client:
            first = await first_round(client.session, "wipe", args)
            [approval] = await shop.pending()
            await shop.decide(approval, DecisionKind.APPROVE)
            # Approved: the call runs upstream, whose own question ends this round, marked as the upstream's.
            asked = await client.session.call_tool(
                "wipe", args, request_state=first.request_state, allow_input_required=True
            )
            assert isinstance(asked, types.InputRequiredResult) and asked.input_requests is not None
            [(key, question)] = asked.input_requests.items()
            assert key == "upstream_question" and isinstance(question, types.ElicitRequest)
            _upstreams_question(question.params, "prod")
            assert "not hitl's" in str((asked.meta or {}).get("io.github.hitl-gate/status"))
            assert shop.effects() == []  # the upstream waits for the answer
            yes: dict[str, Any] = {"upstream_question": types.ElicitResult(action="accept", content={"confirm": True})}
            done = await client.session.call_tool("wipe", args, input_responses=yes, request_state=asked.request_state)
            assert text_of(done) == "wiped prod"
            # The same answer again: the conversation is over; the call's recorded result, the upstream not asked.
            again = await client.session.call_tool("wipe", args, input_responses=yes, request_state=asked.request_state)
            assert text_of(again) == "wiped prod"
        # The SDK's own loop, with a user who accepts everything: the upstream's question reaches them and their
        # "accept" goes to the upstream; no answer of theirs was ever a decision in hitl.
        user = Elicited()
        async with modern(shop, user=user) as client:
            call = asyncio.create_task(client.call_tool("wipe", {"target": "qa"}))
            [second] = await shop.pending()
            await eventually(lambda: user.asked or None, what="the client's user to be sent to the decision page")
            assert shop.effects() == ["wipe prod"]
            await shop.decide(second, DecisionKind.APPROVE)
            result = await asyncio.wait_for(call, 60)
        [page, upstreams] = user.asked
        assert isinstance(page, types.ElicitRequestURLParams) and page.url.endswith(second.id)
        _upstreams_question(upstreams, "qa")
        # The user's form answer {"approved": true} is not the asker's {"confirm": bool}: the upstream refuses it.
        assert result.is_error and "wiped qa" not in text_of(result)
        assert shop.effects() == ["wipe prod"]
        for decided in (approval, second):
            final = await shop.store.approvals.get(decided.id)
            assert [d.reviewer for d in final.decisions] == ["U_SUPPORT1"]
    finally:
        await shop.store.close()


async def test_an_upstreams_question_is_answered_only_by_the_client_it_was_asked_of(tmp_path: Path) -> None:
    shop = asking_shop(tmp_path)
    args = {"target": "billing"}
    yes: dict[str, Any] = {"upstream_question": types.ElicitResult(action="accept", content={"confirm": True})}
    try:
        async with http_gateway(shop) as port:
            async with modern(shop, http_port=port) as alice:
                first = await first_round(alice.session, "wipe", args)
                [approval] = await shop.pending()
                await shop.decide(approval, DecisionKind.APPROVE)
                asked = await alice.session.call_tool(
                    "wipe", args, request_state=first.request_state, allow_input_required=True
                )
                assert isinstance(asked, types.InputRequiredResult)
                async with modern(shop, http_port=port, token=CLIENTS["bob"]) as bob:
                    with pytest.raises(MCPError) as refused:
                        await bob.session.call_tool(
                            "wipe", args, input_responses=yes, request_state=asked.request_state
                        )
                    assert refused.value.error.data == {"code": "request_state_refused"}
                assert shop.effects() == []  # bob's "yes" never reached the upstream
                no: dict[str, Any] = {"upstream_question": types.ElicitResult(action="decline")}
                done = await alice.session.call_tool(
                    "wipe", args, input_responses=no, request_state=asked.request_state
                )
        assert text_of(done) == "not wiped (decline)" and shop.effects() == []
        [entry] = await _refusals(shop)
        assert entry.actor == "token:bob" and entry.detail.endswith("other_principal")
    finally:
        await shop.store.close()


async def test_an_allowed_calls_upstream_url_question_shows_its_host_as_the_upstreams_and_is_relayed_once(
    tmp_path: Path,
) -> None:
    shop = asking_shop(tmp_path)
    args = {"account": "acme"}
    try:
        async with modern(shop) as client:
            asked = await first_round(client.session, "connect", args)
            assert (await shop.store.approvals.list_pending()).items == []  # allowed: the upstream asks at once
            assert asked.input_requests is not None
            question = asked.input_requests["upstream_question"]
            assert isinstance(question, types.ElicitRequest)
            params = question.params
            assert isinstance(params, types.ElicitRequestURLParams)
            assert params.url == "https://billing.example.com/authorize"  # the upstream's link, as it sent it
            head, said = params.message.split("\n", 1)
            assert "upstream MCP server 'asker'" in head and "the link opens billing.example.com" in head
            assert "not hitl" in head and said == "Sign in to link acme."
            yes: dict[str, Any] = {"upstream_question": types.ElicitResult(action="accept")}
            done = await client.session.call_tool(
                "connect", args, input_responses=yes, request_state=asked.request_state
            )
            assert text_of(done) == "connected acme (accept)"
            # The conversation is over, and an allowed call keeps no result: a clear error, not a second run.
            again = await client.session.call_tool(
                "connect", args, input_responses=yes, request_state=asked.request_state
            )
            assert again.is_error and "no longer open" in text_of(again)
    finally:
        await shop.store.close()
