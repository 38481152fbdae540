"""Socket Mode, Slack's side: ``apps.connections.open`` hands out a websocket URL; events travel as
envelopes the app must acknowledge with their ``envelope_id`` (and may answer with a payload)."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["Reply", "SocketHub"]


@dataclass
class Reply:
    """The bot's answer to a Socket Mode envelope."""

    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body) if self.body.strip().startswith("{") else None


@dataclass
class SocketHub:
    """Socket Mode: the stand-in's WebSocket the bot connects to, and envelopes sent over it."""

    app_token: str = "xapp-1-sandbox"
    base_url: str = ""
    sockets: list[web.WebSocketResponse] = field(default_factory=list)
    waiting: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def routes(self) -> list[web.RouteDef]:
        async def open_connection(request: web.Request) -> web.Response:
            header = request.headers.get("Authorization", "")
            if header.removeprefix("Bearer ").strip() != self.app_token:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            ws_url = self.base_url.replace("http://", "ws://", 1) + "/socket"
            return web.json_response({"ok": True, "url": ws_url})

        async def socket(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse(heartbeat=30)
            await ws.prepare(request)
            self.sockets.append(ws)
            await ws.send_json(
                {
                    "type": "hello",
                    "num_connections": len(self.sockets),
                    "connection_info": {"app_id": "A0HITLAPP"},
                    "debug_info": {"host": "sandbox"},
                }
            )
            self.connected.set()
            try:
                async for msg in ws:
                    if msg.type is WSMsgType.TEXT:
                        data = json.loads(msg.data)
                        future = self.waiting.pop(str(data.get("envelope_id")), None)
                        if future is not None and not future.done():
                            future.set_result(data)
            finally:
                self.sockets.remove(ws)
                if not self.sockets:
                    self.connected.clear()
            return ws

        return [web.post("/api/apps.connections.open", open_connection), web.get("/socket", socket)]

    async def deliver(self, kind: str, payload: dict[str, Any], *, timeout: float = 10.0) -> Reply:
        """Send one envelope and wait for the app's acknowledgement (Slack waits 3 s; tests wait longer)."""
        await asyncio.wait_for(self.connected.wait(), timeout)
        envelope_id = f"env-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[envelope_id] = future
        await self.sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": True,
                "retry_attempt": 0,
                "retry_reason": "",
            }
        )
        ack = await asyncio.wait_for(future, timeout)
        return Reply(200, json.dumps(ack.get("payload")) if ack.get("payload") else "")
