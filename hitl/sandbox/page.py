"""The sandbox page: a chat-client view of the emulated workspace, driven through the real bot.

``GET /`` serves the page; ``GET /sandbox/state`` what one user sees; ``GET /sandbox/events`` pushes a
tick on every change (server-sent events); ``POST /sandbox/act`` clicks, runs a slash command, submits or
closes a modal, opens the Home tab, always by sending the bot the same signed request Slack would.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import web

from hitl.sandbox.dispatch import Dispatcher
from hitl.sandbox.webapi import Message, SlackState

__all__ = ["SandboxPage"]

_STATIC = {"app.js": "application/javascript", "style.css": "text/css", "index.html": "text/html"}
_SECURITY = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass
class SandboxPage:
    """The sandbox's page: channels, cards, threads and modals as a person sees them, over server-sent events."""

    state: SlackState
    people: list[dict[str, Any]]
    """``[{"id", "name", "roles"}]`` for the user switcher (configured people and a stranger)."""
    default_channel: str | None = None
    """Channel id shown first (the main approval channel)."""
    dispatcher: Dispatcher | None = None
    """Set once the bot is listening (the page is served before the bot starts)."""
    open_views: dict[str, str] = field(default_factory=dict)
    view_errors: dict[str, dict[str, str]] = field(default_factory=dict)
    version: int = 0
    _subscribers: set[asyncio.Queue[int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.state.listeners.append(self._changed)

    def _changed(self, event: str, payload: Any) -> None:
        if event == "view":
            user, view = payload
            if user:
                self.open_views[user] = str(view["id"])
        self.version += 1
        for queue in list(self._subscribers):
            queue.put_nowait(self.version)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._index),
            web.get("/archives/{channel}/{message}", self._index),  # a card's permalink opens the page at the card
            web.get("/static/{name}", self._static),
            web.get("/sandbox/state", self._state),
            web.get("/sandbox/events", self._events),
            web.post("/sandbox/act", self._act),
        ]

    # -- pages and state ------------------------------------------------------------------------------------
    async def _index(self, _: web.Request) -> web.Response:
        return self._file("index.html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return self._file(name)

    def _file(self, name: str) -> web.Response:
        text = resources.files("hitl.sandbox").joinpath(f"static/{name}").read_text(encoding="utf-8")
        return web.Response(text=text, content_type=_STATIC[name], charset="utf-8", headers=_SECURITY)

    def snapshot(self, user: str, channel_id: str | None) -> dict[str, Any]:
        channels = sorted(self.state.channels.values(), key=lambda c: c.name)
        fallback = self.default_channel if self.default_channel in self.state.channels else None
        current = (
            channel_id if channel_id in self.state.channels else (fallback or (channels[0].id if channels else None))
        )
        visible = [m for m in self.state.messages if m.channel == current and m.ephemeral_to in (None, user)]
        view_id = self.open_views.get(user)
        modal = None
        if view_id and view_id in self.state.views:
            modal = {"view_id": view_id, "view": self.state.views[view_id], "errors": self.view_errors.get(view_id, {})}
        return {
            "version": self.version,
            "user": user,
            "people": self.people,
            "channel": current,
            "channels": [
                {
                    "id": c.id,
                    "name": c.name,
                    # What waits in the channel: cards with controls still on them (a decided card loses its
                    # buttons), so the badge goes down as people decide, as an inbox's would.
                    "count": sum(
                        1
                        for m in self.state.messages
                        if m.channel == c.id and not m.thread_ts and m.ephemeral_to is None and _open(m)
                    ),
                }
                for c in channels
            ],
            "messages": [_message_json(m) for m in visible],
            "modal": modal,
            "home": self.state.homes.get(user),
        }

    async def _state(self, request: web.Request) -> web.Response:
        user = request.query.get("user") or self.people[0]["id"]
        return web.json_response(self.snapshot(user, request.query.get("channel")), headers=_SECURITY)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        queue: asyncio.Queue[int] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            await resp.write(f"data: {self.version}\n\n".encode())
            while True:
                try:
                    version = await asyncio.wait_for(queue.get(), 15)
                    await resp.write(f"data: {version}\n\n".encode())
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._subscribers.discard(queue)
        return resp

    # -- acting ---------------------------------------------------------------------------------------------
    async def _act(self, request: web.Request) -> web.Response:
        # Only the page itself may act: a JSON content type forces a CORS preflight that cross-site pages
        # cannot pass, and a Host check stops DNS rebinding.
        host = (request.host or "").rsplit(":", 1)[0].strip("[]")
        if request.content_type != "application/json" or host not in ("127.0.0.1", "localhost", "::1"):
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"ok": False, "error": "invalid_json"}, status=400)
        user = str(body.get("user") or "")
        if user not in {p["id"] for p in self.people}:
            return web.json_response({"ok": False, "error": "unknown_user"}, status=400)
        try:
            result = await self.act(user, body)
        except LookupError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=404)
        return web.json_response(result)

    async def act(self, user: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.dispatcher is None:
            return {"ok": False, "error": "the bot is not connected yet"}
        kind = body.get("kind")
        if kind == "click":
            message = self.state.by_ts(str(body.get("channel")), str(body.get("ts")))
            if message is None:
                message = next(
                    (m for m in self.state.messages if m.ts == body.get("ts") and m.ephemeral_to == user), None
                )
            if message is None:
                raise LookupError("message_not_found")
            reply = await self.dispatcher.click(user, message, str(body.get("action_id")), value=body.get("value"))
            return {"ok": reply.status == 200, "status": reply.status}
        if kind == "view_click":
            view_id = str(body.get("view_id"))
            if self.open_views.get(user) != view_id:
                raise LookupError("view_not_open")
            reply = await self.dispatcher.click_in_view(
                user, view_id, str(body.get("action_id")), value=body.get("value")
            )
            return {"ok": reply.status == 200, "status": reply.status}
        if kind == "command":
            text = str(body.get("text") or "").strip()
            if not text.startswith("/hitl"):
                return {"ok": False, "error": "Only /hitl commands work in the sandbox."}
            reply = await self.dispatcher.command(user, str(body.get("channel")), text.removeprefix("/hitl").strip())
            return {"ok": reply.status == 200, "status": reply.status}
        if kind == "submit":
            view_id = str(body.get("view_id"))
            if self.open_views.get(user) != view_id:
                raise LookupError("view_not_open")
            reply = await self.dispatcher.submit(user, view_id, dict(body.get("values") or {}))
            answer = reply.json() if reply.status == 200 else None
            if isinstance(answer, dict) and answer.get("response_action") == "errors":
                self.view_errors[view_id] = dict(answer.get("errors") or {})
                self._changed("errors", None)
                return {"ok": False, "errors": self.view_errors[view_id]}
            self.open_views.pop(user, None)
            self.view_errors.pop(view_id, None)
            self._changed("closed", None)
            return {"ok": reply.status == 200, "status": reply.status}
        if kind == "home":
            reply = await self.dispatcher.home_opened(user)
            return {"ok": reply.status == 200, "status": reply.status}
        if kind == "close":
            self.open_views.pop(user, None)
            self._changed("closed", None)
            return {"ok": True}
        return {"ok": False, "error": "unknown_kind"}


def _message_json(m: Message) -> dict[str, Any]:
    return {
        "ts": m.ts,
        "channel": m.channel,
        "user": m.user,
        "text": m.text,
        "blocks": m.blocks,
        "thread_ts": m.thread_ts,
        "ephemeral": m.ephemeral_to is not None,
        "edited": m.edited,
    }


def _open(m: Message) -> bool:
    """A message that still asks someone to act: it carries buttons (a link, such as "Open in browser", asks
    nothing and stays on a decided card)."""
    return any(
        b.get("type") == "actions" and any("url" not in e for e in b.get("elements") or []) for b in m.blocks or []
    )
