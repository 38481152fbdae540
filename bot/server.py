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


@web.middleware
async def _guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """Close two sharp edges of Bolt's adapter: a non-integer timestamp header gives a 500 (it should be
    a 401 like any other unverifiable request), and an unexpected error must never become a 5xx."""
    if request.method == "POST" and request.path == "/slack/events":
        stamp = request.headers.get("X-Slack-Request-Timestamp", "")
        if not stamp.isdigit():
            return web.json_response({"error": "invalid request"}, status=401)
    try:
        response: web.StreamResponse = await handler(request)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("request failed")
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
