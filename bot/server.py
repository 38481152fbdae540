"""Serving the bot: HTTP (aiohttp: /slack/events, /healthz, /metrics) or Socket Mode."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

from bot.app import BotRuntime
from bot.payloads import well_formed
from engine.errors import EngineError

__all__ = ["http_app", "serve_http", "serve_socket"]

log = logging.getLogger(__name__)


REQUEST_TIMEOUT = 10.0
"""Seconds a request may take from its first byte to its answer: a body sent slowly is cut off, not waited for."""


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Close the sharp edges of Bolt's adapter before it parses anything: signature headers must be plain ASCII
    (a Unicode-digit timestamp or a non-ASCII signature is a 400, not a 500), a body must arrive within
    :data:`REQUEST_TIMEOUT`, and an unexpected error must never become a 5xx or a traceback."""
    if request.method == "POST" and request.path == "/slack/events":
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        signature = request.headers.get("X-Slack-Signature", "")
        if not (stamp.isascii() and signature.isascii()):
            return web.json_response({"error": "malformed signature headers"}, status=400)
        if not (stamp.isdigit() and 0 < len(stamp) <= 12):
            return web.json_response({"error": "invalid request"}, status=401)
    try:
        response: web.StreamResponse = await asyncio.wait_for(handler(request), REQUEST_TIMEOUT)
    except web.HTTPException:
        raise
    except TimeoutError:
        log.warning("request to %s took over %.0f s; cut off", request.path, REQUEST_TIMEOUT)
        return web.json_response({"error": "request timeout"}, status=408)
    except Exception as exc:  # one line, no traceback: hostile input must not fill the log
        log.warning("request to %s failed: %s: %s", request.path, type(exc).__name__, str(exc)[:200])
        return web.json_response({"error": "bad request"}, status=400)
    # Bolt verified the signature first (a bad one is already a 401); a 5xx after that on a payload of the
    # wrong shape is Bolt choking on malformed input: answer that as the client's error.
    if response.status >= 500 and request.method == "POST" and not well_formed(await request.read()):
        return web.json_response({"error": "malformed payload"}, status=400)
    return response


def http_app(rt: BotRuntime) -> web.Application:
    """Bolt's aiohttp application plus the health and metrics endpoints."""
    app = rt.app.web_app(path="/slack/events")
    app.middlewares.append(_guard)

    async def healthz(_: web.Request) -> web.Response:
        try:
            await rt.store.ping()
        except EngineError as exc:  # the store is down: say so, and let the orchestrator act
            return web.json_response({"ok": False, "error": str(exc)[:200]}, status=503)
        return web.json_response({"ok": True, "replica": rt.ctx.replica})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=rt.ctx.metrics.render(), content_type="text/plain", charset="utf-8")

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


async def serve_http(rt: BotRuntime, *, host: str, port: int, ready: asyncio.Event | None = None) -> None:
    runner = web.AppRunner(http_app(rt), shutdown_timeout=5.0)
    await runner.setup()
    # Slack retries what is not acknowledged within 3 s: a long graceful drain on shutdown helps nobody.
    site = web.TCPSite(runner, host, port)
    await site.start()
    log.info("hitl serving Slack requests on http://%s:%s/slack/events", host, port)
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


async def serve_socket(rt: BotRuntime, app_token: str) -> None:
    handler = AsyncSocketModeHandler(rt.app, app_token, web_client=rt.client)
    try:
        await handler.start_async()  # type: ignore[no-untyped-call]
    finally:
        await handler.close_async()  # type: ignore[no-untyped-call]
