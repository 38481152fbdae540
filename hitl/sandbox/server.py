"""Run the emulated Slack (Web API, response URLs, Socket Mode, the sandbox page) on a local address."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from hitl.sandbox.socket import SocketHub
from hitl.sandbox.webapi import SlackState, webapi_routes

__all__ = ["Emulator", "start_emulator"]


@dataclass
class Emulator:
    """A running Slack Web API stand-in."""

    state: SlackState
    runner: web.AppRunner
    url: str

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    async def close(self) -> None:
        await self.runner.cleanup()


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@web.middleware
async def _local_only(request: web.Request, handler: Any) -> web.StreamResponse:
    """Answer only requests addressed to this machine: a foreign ``Host`` is DNS rebinding (a page on another
    site resolving its name to 127.0.0.1 to read the workspace or act in it)."""
    host = (request.host or "").rsplit(":", 1)[0].strip("[]").lower() if request.host else ""
    if host not in _LOOPBACK:
        return web.json_response({"ok": False, "error": "forbidden_host"}, status=403)
    response: web.StreamResponse = await handler(request)
    return response


async def start_emulator(
    state: SlackState,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    extra_routes: list[web.RouteDef] | None = None,
    socket: SocketHub | None = None,
) -> Emulator:
    """Start the Slack Web API stand-in on ``host`` (127.0.0.1) and a free port."""
    app = web.Application(client_max_size=4 * 1024 * 1024, middlewares=[_local_only])
    # Socket Mode's routes go first: apps.connections.open takes the app token, not the bot token.
    app.add_routes((socket.routes() if socket else []) + webapi_routes(state) + (extra_routes or []))
    # A stand-in for Slack needs no graceful drain: in-flight requests are dropped at once on close. At once, not
    # after a second: the page's event stream is always in flight, and every close waited the whole grace out. Not
    # 0 either: aiohttp reads a grace of 0 as no limit.
    runner = web.AppRunner(app, shutdown_timeout=0.01)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()  # type: ignore[union-attr]
    url = f"http://{host}:{bound[1]}"
    state.base_url = url
    if socket is not None:
        socket.base_url = url
    return Emulator(state=state, runner=runner, url=url)
