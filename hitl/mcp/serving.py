"""Serving the gateway: over stdio (a desktop assistant or coding agent starts ``hitl mcp`` itself) or over
streamable HTTP (``hitl mcp --http``, for clients that connect to a URL)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import uvicorn
from mcp.server.stdio import stdio_server

from hitl.api.unauthenticated import Unauthenticated

from .gateway import Gateway

__all__ = ["BearerAuth", "BodyDeadline", "serve_http", "serve_stdio"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyDeadline:
    """ASGI middleware: a request's body is read in full before the app sees the request, and must arrive within
    ``seconds`` (a half-sent one gets 408 and the app never runs); a body over ``limit`` bytes gets 413, and a
    compressed one 415 before anything decodes it. The app then reads the buffered body, and later reads go to the
    client (a streamed response waits on them for the client to go away)."""

    def __init__(self, app: ASGIApp, *, seconds: float = 10.0, limit: int = 4 * 1024 * 1024) -> None:
        self.app = app
        self.seconds = seconds
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if headers.get("content-encoding", "").strip().lower() not in ("", "identity"):
            await _answer(send, 415, "unsupported content encoding: send the body uncompressed")
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.seconds):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return  # the client went away before sending its body: nothing to answer
                    chunk = bytes(message.get("body", b""))
                    size += len(chunk)
                    if size > self.limit:
                        await _answer(send, 413, f"the body is over {self.limit} bytes")
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            log.warning("a request body did not arrive within %g s; answered 408", self.seconds)
            await _answer(send, 408, f"the body did not arrive within {self.seconds:g} s")
            return
        buffered: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return buffered.pop() if buffered else await receive()

        await self.app(scope, replay, send)


async def _answer(send: Send, status: int, message: str, *, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"connection", b"close"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_stdio(gateway: Gateway) -> None:
    """Until the client closes stdin. Nothing else may write to stdout: it carries the protocol."""
    async with stdio_server() as (read, write):
        await gateway.server.run(read, write, gateway.server.create_initialization_options())


class BearerAuth:
    """ASGI middleware: a request without a bearer token the gateway accepts (``propose`` scope) gets 401 before
    the MCP app sees it, and is audited (as the API's are); the gateway still
    checks the token of every call it serves (its own identity)."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway
        service = gateway.gate.service
        self.refusals = Unauthenticated(service.store, service.clock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.gateway.caller(headers) is None:
            client = scope.get("client") or ("unknown", 0)
            what = f"{scope.get('method', '')} {scope.get('path', '')}"
            await self.refusals.refused(surface="mcp", address=str(client[0]), what=what)
            why = "send 'Authorization: Bearer <token>' with an API token that has the propose scope"
            await _answer(send, 401, why, headers=[(b"www-authenticate", b'Bearer realm="hitl-mcp"')])
            return
        await self.app(scope, receive, send)


async def serve_http(gateway: Gateway, *, host: str, port: int) -> None:
    """Streamable HTTP at ``http://<host>:<port>/mcp`` until cancelled (DNS-rebinding protection on for localhost),
    each client authenticated by its bearer token."""
    app = BodyDeadline(
        BearerAuth(gateway.server.streamable_http_app(host=host), gateway),
        seconds=float(os.environ.get("HITL_BODY_DEADLINE", "10")),
    )
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    await server.serve()
