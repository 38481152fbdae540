"""Sends clicks, slash commands, modal submissions and Home tab openings to the bot exactly as Slack does:
form-encoded, signed with the signing secret (``v0:{timestamp}:{body}``, HMAC-SHA256), with a working
``response_url`` and a fresh single-use ``trigger_id``."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from hitl.sandbox.socket import Reply, SocketHub
from hitl.sandbox.webapi import Message, SlackState

__all__ = ["Dispatcher", "Reply", "sign"]


def sign(secret: str, body: str, timestamp: int) -> str:
    """``X-Slack-Signature`` for ``body``, computed by slack_sdk exactly as Slack computes it."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    assert signature is not None
    return signature


class Dispatcher:
    """Plays Slack's side of interactivity against the bot's ``/slack/events`` URL."""

    def __init__(
        self,
        state: SlackState,
        http: aiohttp.ClientSession,
        *,
        bot_url: str,
        signing_secret: str,
        app_id: str = "A0HITLAPP",
    ) -> None:
        self.state = state
        self.http = http
        self.bot_url = bot_url
        self.secret = signing_secret
        self.app_id = app_id
        self.socket: SocketHub | None = None
        self.after: Callable[[], Awaitable[None]] | None = None
        """Awaited after each delivery: the sandbox waits for the bot to finish what it does after ``ack()``."""
        self.on_answer: Callable[[int], None] | None = None
        """Called with the status the moment an HTTP answer's status line arrives, before its body is read (the
        crash suite kills the bot there)."""

    async def post(self, body: str, *, timestamp: int | None = None, signature: str | None = None) -> Reply:
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": signature if signature is not None else sign(self.secret, body, ts),
        }
        async with self.http.post(self.bot_url, data=body.encode(), headers=headers) as resp:
            if self.on_answer is not None:
                self.on_answer(resp.status)
            return Reply(resp.status, await resp.text())

    def _user(self, user: str) -> dict[str, Any]:
        name = str(self.state.users.get(user, {}).get("name", user.lower()))
        return {"id": user, "username": name, "name": name, "team_id": self.state.team_id}

    def _team(self) -> dict[str, Any]:
        return {"id": self.state.team_id, "domain": "hitl-sandbox"}

    async def click(self, user: str, message: Message, action_id: str, *, value: str | None = None) -> Reply:
        """Press a button on ``message`` (found by its action id) as ``user``."""
        element, block_id = _find_button(message.blocks, action_id, value)
        channel = self.state.channels.get(message.channel)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user(user),
            "api_app_id": self.app_id,
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": message.ephemeral_to is not None,
            },
            "trigger_id": self.state.new_trigger(user),
            "team": self._team(),
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": channel.name if channel else "unknown"},
            "message": {"type": "message", "ts": message.ts, "text": message.text, "blocks": message.blocks},
            "state": {"values": {}},
            "response_url": self.state.new_response_url(message.channel, user),
            "actions": [{**element, "block_id": block_id, "action_ts": f"{time.time():.6f}"}],
        }
        return await self.send("interactive", payload)

    async def click_in_view(self, user: str, view_id: str, action_id: str, *, value: str | None = None) -> Reply:
        """Press a button in the open modal ``view_id`` as ``user`` (a ``block_actions`` from a view container)."""
        view = self.state.views[view_id]
        element, block_id = _find_button(view.get("blocks") or [], action_id, value)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": self._user(user),
            "api_app_id": self.app_id,
            "token": "legacy-verification-token",
            "container": {"type": "view", "view_id": view_id},
            "trigger_id": self.state.new_trigger(user),
            "team": self._team(),
            "enterprise": None,
            "is_enterprise_install": False,
            "view": {**view, "team_id": self.state.team_id, "hash": f"h{view_id}", "app_id": self.app_id},
            "actions": [{**element, "block_id": block_id, "action_ts": f"{time.time():.6f}"}],
        }
        return await self.send("interactive", payload)

    async def command(self, user: str, channel: str, text: str, *, command: str = "/hitl") -> Reply:
        """Run ``command text`` as ``user``; an ``@name`` of a member arrives as ``<@ID|name>``, as Slack escapes
        it for a command whose manifest says ``should_escape: true``."""
        ch = self.state.channel(channel)
        text = self._escaped(text)
        fields = {
            "token": "legacy-verification-token",
            "team_id": self.state.team_id,
            "team_domain": "hitl-sandbox",
            "channel_id": ch.id if ch else channel,
            "channel_name": ch.name if ch else channel,
            "user_id": user,
            "user_name": self._user(user)["name"],
            "command": command,
            "text": text,
            "api_app_id": self.app_id,
            "is_enterprise_install": "false",
            "response_url": self.state.new_response_url(ch.id if ch else channel, user),
            "trigger_id": self.state.new_trigger(user),
        }
        return await self.send("slash_commands", fields)

    def _escaped(self, text: str) -> str:
        by_name = {str(u.get("name", "")): uid for uid, u in self.state.users.items()}

        def mention(m: re.Match[str]) -> str:
            uid = by_name.get(m.group(1))
            return f"<@{uid}|{m.group(1)}>" if uid else m.group(0)

        return re.sub(r"(?<![<\w])@([a-z0-9._-]+)", mention, text)

    async def submit(self, user: str, view_id: str, values: dict[str, dict[str, dict[str, Any]]]) -> Reply:
        """Submit an open modal with ``state.values`` shaped as Slack sends them."""
        view = self.state.views[view_id]
        payload = {
            "type": "view_submission",
            "team": self._team(),
            "user": self._user(user),
            "api_app_id": self.app_id,
            "token": "legacy-verification-token",
            "trigger_id": self.state.new_trigger(user),
            "view": {
                **view,
                "team_id": self.state.team_id,
                "state": {"values": values},
                "hash": "h",
                "app_id": self.app_id,
                "bot_id": "B0HITLBOT",
            },
            "response_urls": [],
            "is_enterprise_install": False,
        }
        return await self.send("interactive", payload)

    async def home_opened(self, user: str) -> Reply:
        """``user`` opens the app's Home tab: an ``app_home_opened`` event, as the Events API delivers it (a signed
        JSON body over HTTP; an ``events_api`` envelope in Socket Mode)."""
        now = time.time()
        payload = {
            "token": "legacy-verification-token",
            "team_id": self.state.team_id,
            "api_app_id": self.app_id,
            "event": {
                "type": "app_home_opened",
                "user": user,
                "channel": "D" + user[1:],
                "tab": "home",
                "event_ts": f"{now:.6f}",
            },
            "type": "event_callback",
            "event_id": f"Ev{int(now * 1000)}",
            "event_time": int(now),
            "authorizations": [{"team_id": self.state.team_id, "user_id": self.state.bot_user, "is_bot": True}],
        }
        if self.socket is not None:
            reply = await self.socket.deliver("events_api", payload)
        else:
            body = json.dumps(payload)
            ts = int(now)
            headers = {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": str(ts),
                "X-Slack-Signature": sign(self.secret, body, ts),
            }
            async with self.http.post(self.bot_url, data=body.encode(), headers=headers) as resp:
                reply = Reply(resp.status, await resp.text())
        if self.after is not None:
            await self.after()
        return reply

    async def send(self, kind: str, payload: dict[str, Any]) -> Reply:
        """Deliver over HTTP (signed, form-encoded) or, when the bot is in Socket Mode, over its websocket."""
        if self.socket is not None:
            reply = await self.socket.deliver(kind, payload)
        else:
            body = urlencode(payload) if kind == "slash_commands" else urlencode({"payload": json.dumps(payload)})
            reply = await self.post(body)
        if self.after is not None:
            await self.after()
        return reply


def _find_button(blocks: list[dict[str, Any]], action_id: str, value: str | None) -> tuple[dict[str, Any], str]:
    """The first button with ``action_id`` (and ``value``, if given): in an actions block, or a section's accessory."""
    for block in blocks:
        accessory = block.get("accessory") if block.get("type") == "section" else None
        elements = block.get("elements", []) if block.get("type") == "actions" else [accessory] if accessory else []
        for el in elements:
            if el.get("action_id") == action_id and (value is None or el.get("value") == value):
                return dict(el), str(block.get("block_id", ""))
    raise LookupError(f"no {action_id} button on this message")
