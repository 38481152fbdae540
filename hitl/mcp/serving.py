"""Serving the gateway: over stdio (a desktop assistant or coding agent starts ``hitl mcp`` itself) or over
streamable HTTP (``hitl mcp --http``, for clients that connect to a URL)."""

from __future__ import annotations

import uvicorn
from mcp.server.stdio import stdio_server

from .gateway import Gateway

__all__ = ["serve_http", "serve_stdio"]


async def serve_stdio(gateway: Gateway) -> None:
    """Until the client closes stdin. Nothing else may write to stdout: it carries the protocol."""
    async with stdio_server() as (read, write):
        await gateway.server.run(read, write, gateway.server.create_initialization_options())


async def serve_http(gateway: Gateway, *, host: str, port: int) -> None:
    """Streamable HTTP at ``http://<host>:<port>/mcp`` until cancelled (DNS-rebinding protection on for localhost)."""
    app = gateway.server.streamable_http_app(host=host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    await server.serve()
