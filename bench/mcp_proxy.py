"""A pass-through MCP proxy on the same SDK as `hitl mcp`: the floor `bench/mcp_bench.py` compares the gateway with.

It lists the upstream's tools and forwards every call unchanged: one more stdio hop and the SDK's work on both of
its sides, and nothing else (no gate, no store). Run by the benchmark as
``python bench/mcp_proxy.py <upstream command...>``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def main(command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as upstream:
        await upstream.initialize()
        tools = (await upstream.list_tools()).tools

        async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
            return await upstream.call_tool(params.name, dict(params.arguments or {}))

        server: Server[Any] = Server("proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (sread, swrite):
            await server.run(sread, swrite, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
