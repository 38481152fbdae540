"""The emulator rejects what Slack rejects (Slack's documented limits, error names and shapes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from hitl.sandbox.server import Emulator, start_emulator
from hitl.sandbox.webapi import SlackState


@pytest.fixture
async def slack() -> AsyncIterator[tuple[Emulator, AsyncWebClient, aiohttp.ClientSession]]:
    state = SlackState(rate_limited=False)  # what is checked here is each call's shape (test_rate_limits: the pace)
    state.add_channel("approvals")
    state.users["U1"] = {"name": "one"}
    emulator = await start_emulator(state)
    http = aiohttp.ClientSession()
    client = AsyncWebClient(token=state.token, base_url=emulator.api_url, session=http)
    yield emulator, client, http
    await http.close()
    await emulator.close()


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as err:
        await call
    return str(err.value.response["error"])


async def test_message_limits(slack: tuple[Emulator, AsyncWebClient, aiohttp.ClientSession]) -> None:
    _, client, _ = slack
    ok = await client.chat_postMessage(channel="#approvals", text="hi", blocks=[section("x" * 3000)] * 4)
    assert ok["ok"] and ok["channel"].startswith("C")
    cases = [
        [section("x")] * 51,
        [section("x" * 3001)],
        [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        [{"type": "header", "text": {"type": "mrkdwn", "text": "bold header"}}],
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}],
        [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}],
        [
            {
                "type": "actions",
                "elements": [{"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "b" * 76}}],
            }
        ],
        [
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "a",
                        "value": "v" * 2001,
                        "text": {"type": "plain_text", "text": "ok"},
                    }
                ],
            }
        ],
        [
            {
                "type": "actions",
                "elements": [{"type": "button", "action_id": "same", "text": {"type": "plain_text", "text": "1"}}] * 2,
            }
        ],
        [{"type": "actions", "elements": []}],
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}],
        [
            {"type": "section", "block_id": "b", "text": {"type": "mrkdwn", "text": "1"}},
            {"type": "section", "block_id": "b", "text": {"type": "mrkdwn", "text": "2"}},
        ],
        [{"type": "carousel"}],
        [
            {
                "type": "rich_text",
                "elements": [{"type": "rich_text_section", "elements": [{"type": "link", "text": "x"}]}],
            }
        ],
        [
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "a",
                        "text": {"type": "plain_text", "text": "x"},
                        "confirm": {
                            "title": {"type": "plain_text", "text": "t" * 101},
                            "text": {"type": "plain_text", "text": "t"},
                            "confirm": {"type": "plain_text", "text": "y"},
                            "deny": {"type": "plain_text", "text": "n"},
                        },
                    }
                ],
            }
        ],
    ]
    for blocks in cases:
        assert (
            await error_of(client.chat_postMessage(channel="#approvals", text="t", blocks=blocks)) == "invalid_blocks"
        ), blocks
    assert (
        await error_of(client.chat_postMessage(channel="#approvals", text="t", blocks=[section("x" * 3000)] * 5))
        == "msg_blocks_too_long"
    )
    assert await error_of(client.chat_postMessage(channel="#nowhere", text="t")) == "channel_not_found"
    with pytest.warns(UserWarning, match="text"):  # the SDK warns too; Slack answers no_text
        assert await error_of(client.chat_postMessage(channel="#approvals", text="")) == "no_text"
    assert await error_of(client.chat_update(channel=ok["channel"], ts="1.2", text="t")) == "message_not_found"
    assert await error_of(client.chat_postEphemeral(channel="#approvals", user="U404", text="t")) == "user_not_found"
    assert (
        await error_of(client.chat_postMessage(channel="#approvals", text="t", thread_ts="9.9")) == "thread_not_found"
    )


async def test_auth_and_unknown_methods(slack: tuple[Emulator, AsyncWebClient, aiohttp.ClientSession]) -> None:
    emulator, _, http = slack
    bad = AsyncWebClient(token="xoxb-wrong", base_url=emulator.api_url, session=http)
    assert await error_of(bad.auth_test()) == "invalid_auth"
    async with http.post(f"{emulator.api_url}auth.test") as resp:
        assert (await resp.json())["error"] == "not_authed"
    async with http.post(
        f"{emulator.api_url}files.upload", headers={"Authorization": f"Bearer {emulator.state.token}"}
    ) as r:
        assert r.status == 404
    good = await AsyncWebClient(token=emulator.state.token, base_url=emulator.api_url, session=http).auth_test()
    assert {"user_id", "team_id", "bot_id"} <= set(good.data)


async def test_modals_and_single_use_triggers(slack: tuple[Emulator, AsyncWebClient, aiohttp.ClientSession]) -> None:
    emulator, client, _ = slack
    state = emulator.state
    view = {"type": "modal", "title": {"type": "plain_text", "text": "Modify action"}, "blocks": [section("x")]}
    trigger = state.new_trigger("U1")
    opened = await client.views_open(trigger_id=trigger, view=view)
    assert opened["view"]["id"].startswith("V")
    assert await error_of(client.views_open(trigger_id=trigger, view=view)) == "invalid_trigger_id"  # single use
    late = state.new_trigger("U1")
    state.triggers[late] = (state.clock() - 3.5, "U1")
    assert await error_of(client.views_open(trigger_id=late, view=view)) == "expired_trigger_id"
    for broken in (
        {**view, "title": {"type": "plain_text", "text": "t" * 25}},
        {**view, "blocks": []},
        {**view, "private_metadata": "m" * 3001},
        {**view, "blocks": [section("x")] * 101},
        {**view, "type": "home"},
        {
            **view,
            "blocks": [
                {"type": "input", "label": {"type": "plain_text", "text": "n"}, "element": {"type": "number_input"}}
            ],
        },
    ):
        assert await error_of(client.views_open(trigger_id=state.new_trigger("U1"), view=broken)) == "invalid_arguments"


async def test_response_urls_work_five_times(slack: tuple[Emulator, AsyncWebClient, aiohttp.ClientSession]) -> None:
    emulator, _, http = slack
    state = emulator.state
    channel = next(iter(state.channels))
    url = state.new_response_url(channel, "U1")
    for _ in range(5):
        async with http.post(url, json={"text": "hi"}) as resp:
            assert resp.status == 200
    async with http.post(url, json={"text": "again"}) as resp:
        assert resp.status == 404
    assert [m.ephemeral_to for m in state.messages] == ["U1"] * 5
    async with http.post(state.new_response_url(channel, "U1"), json={"blocks": [section("x")] * 51}) as resp:
        assert resp.status == 400


async def test_sandbox_page_refuses_cross_site_and_rebinding_requests(tmp_path: Any, monkeypatch: Any) -> None:
    from hitl.demo.examples import refund_example
    from hitl.demo.launch import start_sandbox
    from hitl.engine.storage.sqlite import SqliteStore

    monkeypatch.setenv("SHOP_DB", str(tmp_path / "shop.db"))
    sb = await start_sandbox(
        config_path=refund_example() / "hitl.yaml", store=SqliteStore(tmp_path / "s.db"), worker=False
    )
    try:
        act = f"{sb.url}/sandbox/act"
        body = '{"user": "U_SUPPORT1", "kind": "command", "channel": "x", "text": "/hitl help"}'
        async with aiohttp.ClientSession() as http:
            async with http.post(act, data=body, headers={"Content-Type": "text/plain"}) as r:
                assert r.status == 403
            async with http.post(
                act, data=body, headers={"Content-Type": "application/json", "Host": "evil.example"}
            ) as r:
                assert r.status == 403
            async with http.post(act, data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200
            async with http.post(act, json={"user": "U_NOBODY", "kind": "close"}) as r:
                assert r.status == 400
    finally:
        await sb.close()


async def test_the_sandbox_refuses_foreign_hosts_and_state_changing_gets(
    slack: tuple[Emulator, AsyncWebClient, aiohttp.ClientSession],
) -> None:
    """DNS rebinding (a foreign Host) and a cross-site GET (an <img> tag) can neither read nor act."""
    emulator, _, http = slack
    for path in ("/", "/sandbox/state", f"/api/auth.test?token={emulator.state.token}"):
        async with http.get(f"{emulator.url}{path}", headers={"Host": "evil.example"}) as r:
            assert r.status == 403 and (await r.json())["error"] == "forbidden_host"
    general = emulator.state.channel("approvals")
    assert general is not None
    query = f"token={emulator.state.token}&channel={general.id}&text=pwned"
    async with http.get(f"{emulator.api_url}chat.postMessage?{query}") as r:
        assert r.status == 405
    assert not any(m.text == "pwned" for m in emulator.state.messages)
    async with http.get(f"{emulator.api_url}auth.test?token={emulator.state.token}") as r:
        assert (await r.json())["ok"] is True  # reads still work
