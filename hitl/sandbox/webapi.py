"""The Slack Web API subset hitl uses, served over real HTTP and validated the way Slack validates it.

Answers are Slack-shaped: HTTP 200 with ``{"ok": false, "error": "channel_not_found"}`` for a bad call,
HTTP 429 with ``Retry-After`` over Slack's rate limits (:mod:`hitl.sandbox.rate_limits`) or when a fault is
injected. ``trigger_id``s are single-use and expire after 3 s.
State (channels, messages, threads, ephemeral messages, modals, Home tabs) is kept in memory for the sandbox page
and for tests to inspect.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from hitl.sandbox.limits import home_problems, message_problems, view_problems
from hitl.sandbox.rate_limits import SlackLimits

__all__ = ["Call", "Channel", "Message", "SlackState", "webapi_routes"]

TRIGGER_TTL = 3.0


@dataclass
class Message:
    """A message as the stand-in stores it."""

    ts: str
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    ephemeral_to: str | None = None
    edited: int = 0
    metadata: dict[str, Any] | None = None
    """The message's metadata (``event_type``, ``event_payload``), as the poster attached it."""


@dataclass
class Channel:
    """A channel of the stand-in's workspace."""

    id: str
    name: str


@dataclass
class Call:
    """One Web API call the bot made, and how it was answered."""

    method: str
    args: dict[str, Any]
    status: int
    response: dict[str, Any]


@dataclass
class SlackState:
    """Everything the fake workspace holds. ``clock`` is injectable for trigger expiry and the rate limits."""

    token: str = field(default_factory=lambda: f"xoxb-sandbox-{secrets.token_hex(8)}")
    """A fresh token per workspace: a page on another site cannot guess it to post as the bot."""
    team_id: str = "T0SANDBOX"
    bot_user: str = "U0HITLBOT"
    channels: dict[str, Channel] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)
    view_owner: dict[str, str] = field(default_factory=dict)
    homes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each user's published Home tab (``views.publish``)."""
    calls: list[Call] = field(default_factory=list)
    triggers: dict[str, tuple[float, str]] = field(default_factory=dict)
    faults: list[tuple[str, int, int]] = field(default_factory=list)
    """Queued faults: (method, HTTP status, Retry-After seconds)."""
    clock: Callable[[], float] = time.time
    listeners: list[Callable[[str, Any], None]] = field(default_factory=list)
    _seq: Any = field(default_factory=lambda: itertools.count(1))

    response_urls: dict[str, dict[str, Any]] = field(default_factory=dict)
    base_url: str = ""
    """Where this emulator is served (set by the server), for the response_urls it hands out."""
    archived: set[str] = field(default_factory=set)
    """Channel ids whose posts are refused ``is_archived`` (the channel was archived)."""
    outage: int | None = None
    """While set, every call is answered with this HTTP status (500, 503, or 429 with ``Retry-After``): Slack down
    or holding every post."""
    revoked: bool = False
    """The bot's token was revoked (an admin removed the app): every call is answered ``token_revoked``."""
    rate_limited: bool = True
    """Enforce Slack's rate limits (:attr:`limits`); off only to measure what they cost."""
    burst: int = 10
    """Each rate limit's burst (Slack publishes none)."""
    limits: SlackLimits = field(init=False)
    """The rate limits as they stand (how many calls were refused, and how many came too early)."""

    def __post_init__(self) -> None:
        self.limits = SlackLimits(lambda: self.clock(), burst=self.burst)

    def add_channel(self, name: str) -> Channel:
        cid = "C" + hashlib.sha256(name.encode()).hexdigest()[:9].upper()
        ch = Channel(id=cid, name=name.lstrip("#"))
        self.channels[ch.id] = ch
        return ch

    def channel(self, ref: str) -> Channel | None:
        if ref in self.channels:
            return self.channels[ref]
        if ref in self.users:  # as Slack does: a message to a user id goes to their DM with the app
            dm = Channel(id="D" + ref[1:], name=ref)
            self.channels.setdefault(dm.id, dm)
            return self.channels[dm.id]
        name = ref.lstrip("#")
        return next((c for c in self.channels.values() if c.name == name), None)

    def new_ts(self) -> str:
        return f"{int(self.clock())}.{next(self._seq):06d}"

    def new_trigger(self, user: str) -> str:
        trigger = f"{next(self._seq)}.{int(self.clock())}.sandbox"
        self.triggers[trigger] = (self.clock(), user)
        return trigger

    def new_response_url(self, channel: str, user: str) -> str:
        """A response_url like Slack's: 5 uses within 30 minutes."""
        token = f"R{next(self._seq):08d}"
        self.response_urls[token] = {"channel": channel, "user": user, "uses": 0, "created": self.clock()}
        return f"{self.base_url}/response/{token}"

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 1) -> None:
        self.faults.append((method, status, retry_after))

    def garble_next(self, method: str) -> None:
        """Answer the next call of ``method`` with an HTML page instead of JSON (a proxy's error page)."""
        self.faults.append((method, 200, -1))

    def notify(self, event: str, payload: Any) -> None:
        for listener in list(self.listeners):
            listener(event, payload)

    def by_ts(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages if m.channel == channel and m.ts == ts and not m.ephemeral_to), None)

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


class _Err(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.body = {"ok": False, "error": error, **extra}


async def _args(request: web.Request) -> dict[str, Any]:
    ctype = request.headers.get("Content-Type", "")
    raw = await request.text()
    if ctype.startswith("application/json"):
        try:
            data = json.loads(raw or "{}")
        except json.JSONDecodeError:
            raise _Err("invalid_json") from None
        if not isinstance(data, dict):
            raise _Err("invalid_json")
        return data
    data = dict(parse_qsl(raw, keep_blank_values=True))
    data.update(request.query)
    for key in ("blocks", "view", "attachments"):
        if isinstance(data.get(key), str) and data[key]:
            try:
                data[key] = json.loads(data[key])
            except json.JSONDecodeError:
                raise _Err("invalid_blocks_format" if key == "blocks" else "invalid_arguments") from None
    return data


def _auth(state: SlackState, request: web.Request, args: dict[str, Any]) -> None:
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else args.get("token")
    if not token:
        raise _Err("not_authed")
    if token != state.token:
        raise _Err("invalid_auth")
    if state.revoked:
        raise _Err("token_revoked")


def _message_body(args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    text = args.get("text") or ""
    blocks = args.get("blocks") or []
    if not text and not blocks:
        raise _Err("no_text")
    if blocks:
        error, problems = message_problems(blocks)
        if error:
            raise _Err(error, response_metadata={"messages": [f"[ERROR] {p}" for p in problems]})
    if len(text) > 40_000:
        raise _Err("msg_too_long")
    return str(text), list(blocks)


def _metadata(args: dict[str, Any]) -> dict[str, Any] | None:
    """The ``metadata`` argument as Slack takes it: a JSON object (or its text) with a non-empty alphanumeric
    ``event_type`` and an object ``event_payload``."""
    raw = args.get("metadata")
    if raw in (None, ""):
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise _Err("invalid_metadata_format") from None
    if not isinstance(raw, dict) or set(raw) != {"event_type", "event_payload"}:
        raise _Err("invalid_metadata_format")
    kind, payload = raw["event_type"], raw["event_payload"]
    if not isinstance(kind, str) or not kind.replace("_", "").isalnum() or not isinstance(payload, dict):
        raise _Err("invalid_metadata_schema")
    return {"event_type": kind, "event_payload": payload}


def _chan(state: SlackState, args: dict[str, Any]) -> Channel:
    ref = args.get("channel")
    if not ref:
        raise _Err("channel_not_found")
    ch = state.channel(str(ref))
    if ch is None:
        raise _Err("channel_not_found")
    return ch


def _user(state: SlackState, ref: Any) -> str:
    if not ref or str(ref) not in state.users:
        raise _Err("user_not_found")
    return str(ref)


class _Methods:
    """The Web API methods the sandbox answers, each on the workspace's state."""

    def __init__(self, state: SlackState) -> None:
        self.state = state

    def auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "http://sandbox.slack.local/",
            "team": "hitl sandbox",
            "user": "hitl",
            "team_id": self.state.team_id,
            "user_id": self.state.bot_user,
            "bot_id": "B0HITLBOT",
        }

    def post_message(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = _chan(self.state, a)
        if ch.id in self.state.archived:
            raise _Err("is_archived")
        text, blocks = _message_body(a)
        thread = a.get("thread_ts")
        if thread and self.state.by_ts(ch.id, str(thread)) is None:
            raise _Err("thread_not_found")
        msg = Message(
            ts=self.state.new_ts(),
            channel=ch.id,
            user=self.state.bot_user,
            text=text,
            blocks=blocks,
            thread_ts=str(thread) if thread else None,
            metadata=_metadata(a),
        )
        self.state.messages.append(msg)
        self.state.notify("message", msg)
        return {
            "ok": True,
            "channel": ch.id,
            "ts": msg.ts,
            "message": {"type": "message", "text": text, "blocks": blocks, "ts": msg.ts, "user": msg.user},
        }

    def update(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = _chan(self.state, a)
        msg = self.state.by_ts(ch.id, str(a.get("ts") or ""))
        if msg is None:
            raise _Err("message_not_found")
        text, blocks = _message_body(a)
        msg.text, msg.blocks, msg.edited = text, blocks, msg.edited + 1
        self.state.notify("message", msg)
        return {"ok": True, "channel": ch.id, "ts": msg.ts, "text": text}

    def post_ephemeral(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = _chan(self.state, a)
        user = _user(self.state, a.get("user"))
        text, blocks = _message_body(a)
        msg = Message(
            ts=self.state.new_ts(), channel=ch.id, user=self.state.bot_user, text=text, blocks=blocks, ephemeral_to=user
        )
        self.state.messages.append(msg)
        self.state.notify("message", msg)
        return {"ok": True, "message_ts": msg.ts}

    def views_open(self, a: dict[str, Any]) -> dict[str, Any]:
        trigger = str(a.get("trigger_id") or "")
        found = self.state.triggers.pop(trigger, None)
        if found is None:
            raise _Err("invalid_trigger_id")
        if self.state.clock() - found[0] > TRIGGER_TTL:
            raise _Err("expired_trigger_id")
        problems = view_problems(a.get("view"))
        if problems:
            raise _Err("invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]})
        view_id = f"V{next(self.state._seq):08d}"
        view = {**a["view"], "id": view_id}
        self.state.views[view_id] = view
        self.state.view_owner[view_id] = found[1]
        self.state.notify("view", (found[1], view))
        return {"ok": True, "view": view}

    def views_update(self, a: dict[str, Any]) -> dict[str, Any]:
        view_id = str(a.get("view_id") or "")
        if view_id not in self.state.views:
            raise _Err("not_found")
        problems = view_problems(a.get("view"))
        if problems:
            raise _Err("invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]})
        self.state.views[view_id] = {**a["view"], "id": view_id}
        self.state.notify("view", (self.state.view_owner.get(view_id, ""), self.state.views[view_id]))
        return {"ok": True, "view": self.state.views[view_id]}

    def views_publish(self, a: dict[str, Any]) -> dict[str, Any]:
        user = _user(self.state, a.get("user_id"))
        problems = home_problems(a.get("view"))
        if problems:
            raise _Err("invalid_arguments", response_metadata={"messages": [f"[ERROR] {p}" for p in problems]})
        view_id = self.state.homes.get(user, {}).get("id") or f"V{next(self.state._seq):08d}"
        self.state.homes[user] = {**a["view"], "id": view_id}
        self.state.notify("home", (user, self.state.homes[user]))
        return {"ok": True, "view": self.state.homes[user]}

    def permalink(self, a: dict[str, Any]) -> dict[str, Any]:
        ch = _chan(self.state, a)
        ts = str(a.get("message_ts") or "")
        if self.state.by_ts(ch.id, ts) is None:
            raise _Err("message_not_found")
        return {
            "ok": True,
            "channel": ch.id,
            "permalink": f"{self.state.base_url}/archives/{ch.id}/p{ts.replace('.', '')}",
        }

    def history(self, a: dict[str, Any]) -> dict[str, Any]:
        """``conversations.history``: a channel's messages (no thread replies), newest first, between ``oldest``
        and ``latest``, ``limit`` a page (at most 999) with a cursor; metadata only with ``include_all_metadata``.
        Like Slack, it takes a channel's id only, not its name."""
        ch = self.state.channels.get(str(a.get("channel") or ""))
        if ch is None:
            raise _Err("channel_not_found")
        try:
            oldest = float(a.get("oldest") or 0)
            latest = float(a.get("latest") or "inf")
            limit = min(int(a.get("limit") or 100), 999)
            start = int(a.get("cursor") or 0)
        except ValueError:
            raise _Err("invalid_arguments") from None
        if limit < 1 or start < 0:
            raise _Err("invalid_limit" if limit < 1 else "invalid_cursor")
        with_metadata = str(a.get("include_all_metadata", "")).lower() in ("1", "true")
        found = [
            m
            for m in reversed(self.state.messages)
            if m.channel == ch.id
            and not m.ephemeral_to
            and (m.thread_ts is None or m.thread_ts == m.ts)
            and oldest < float(m.ts) < latest
        ]
        page = found[start : start + limit]
        messages = []
        for m in page:
            out: dict[str, Any] = {"type": "message", "ts": m.ts, "user": m.user, "text": m.text, "blocks": m.blocks}
            if with_metadata and m.metadata is not None:
                out["metadata"] = m.metadata
            messages.append(out)
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": messages,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def usergroup_users(self, a: dict[str, Any]) -> dict[str, Any]:
        group = str(a.get("usergroup") or "")
        if group not in self.state.usergroups:
            raise _Err("no_such_subteam")
        return {"ok": True, "users": list(self.state.usergroups[group])}

    def users_info(self, a: dict[str, Any]) -> dict[str, Any]:
        user = _user(self.state, a.get("user"))
        return {"ok": True, "user": {"id": user, **self.state.users[user]}}


def _method_table(state: SlackState) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    methods = _Methods(state)
    return {
        "auth.test": methods.auth_test,
        "chat.postMessage": methods.post_message,
        "chat.update": methods.update,
        "chat.postEphemeral": methods.post_ephemeral,
        "views.open": methods.views_open,
        "views.update": methods.views_update,
        "views.publish": methods.views_publish,
        "chat.getPermalink": methods.permalink,
        "conversations.history": methods.history,
        "usergroups.users.list": methods.usergroup_users,
        "users.info": methods.users_info,
    }


_READS = frozenset({"auth.test", "users.info", "usergroups.users.list", "chat.getPermalink", "conversations.history"})


def webapi_routes(state: SlackState) -> list[web.RouteDef]:
    """Routes for ``/api/{method}`` on an aiohttp application."""
    table = _method_table(state)

    async def handle(request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.method == "GET" and method not in _READS:
            # Slack takes GET too, but a stand-in on your machine must not let a cross-site <img> change state.
            return web.json_response({"ok": False, "error": "method_not_allowed", "hint": "use POST"}, status=405)
        args: dict[str, Any] = {}
        status, body = 200, {}
        headers: dict[str, str] = {}
        try:
            args = await _args(request)
            fault = next((f for f in state.faults if f[0] == method), None)
            if state.outage is not None:
                fault = (method, state.outage, 1)
            elif fault is not None:
                state.faults.remove(fault)
            if fault is not None and fault[2] < 0:
                state.calls.append(Call(method, args, 200, {}))
                return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
            if fault is not None:
                status = fault[1]
                headers = {"Retry-After": str(fault[2])} if status == 429 else {}
                if status == 429:
                    state.limits.hold(method, args, fault[2])
                body = {"ok": False, "error": "ratelimited" if status == 429 else "internal_error"}
            elif method not in table:
                status, body = 404, {"ok": False, "error": "unknown_method"}
            else:
                _auth(state, request, args)
                wait = state.limits.check(method, args) if state.rate_limited else None
                if wait is not None:
                    status, headers, body = 429, {"Retry-After": str(wait)}, {"ok": False, "error": "ratelimited"}
                else:
                    body = table[method](args)
        except _Err as exc:
            body = exc.body
        state.calls.append(Call(method, args, status, body))
        return web.json_response(body, status=status, headers=headers)

    async def respond(request: web.Request) -> web.Response:
        entry = state.response_urls.get(request.match_info["token"])
        if entry is None:
            return web.json_response({"ok": False, "error": "invalid_token"}, status=404)
        if entry["uses"] >= 5 or state.clock() - entry["created"] > 1800:
            return web.json_response({"ok": False, "error": "expired_url"}, status=404)
        try:
            payload = json.loads(await request.text() or "{}")
            text, blocks = _message_body(payload)
        except _Err as exc:
            state.calls.append(Call("response_url", {}, 400, exc.body))
            return web.json_response(exc.body, status=400)
        except json.JSONDecodeError:
            return web.json_response({"ok": False, "error": "invalid_json"}, status=400)
        entry["uses"] += 1
        ephemeral = payload.get("response_type", "ephemeral") != "in_channel"
        msg = Message(
            ts=state.new_ts(),
            channel=entry["channel"],
            user=state.bot_user,
            text=text,
            blocks=blocks,
            ephemeral_to=entry["user"] if ephemeral else None,
        )
        state.messages.append(msg)
        state.calls.append(Call("response_url", payload, 200, {"ok": True}))
        state.notify("message", msg)
        return web.json_response({"ok": True})

    return [
        web.post("/api/{method}", handle),
        web.get("/api/{method}", handle),
        web.post("/response/{token}", respond),
    ]
