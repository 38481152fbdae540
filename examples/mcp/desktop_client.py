"""An MCP client (as a desktop assistant would be) talking to `hitl mcp` over stdio. Run:
python examples/mcp/desktop_client.py

A reviewer coroutine stands in for the Slack click (run `hitl serve` on the same store to get the real card).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from hitl import ApprovalService, DecideRequest, DecisionKind, SystemClock, load_config, open_store

HERE = Path(__file__).resolve().parent


def text(result: object) -> str:
    assert isinstance(result, types.CallToolResult)
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def reviewer(store_url: str) -> None:
    """Approve the first pending refund, as a support reviewer would from its card."""
    store = open_store(store_url)
    service = ApprovalService.from_config(load_config(HERE / "hitl.yaml"), store=store, clock=SystemClock())
    try:
        while not (pending := (await store.approvals.list_pending()).items):
            await asyncio.sleep(0.05)
        print(f"card: {pending[0].tool} {pending[0].args} (approval {pending[0].id[:8]}…)")
        await service.decide(DecideRequest(pending[0].id, "U_SUPPORT1", DecisionKind.APPROVE, via="slack"))
    finally:
        await store.close()


async def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        store_url = f"sqlite:///{work}/hitl.db"
        env = {**os.environ, "HITL_STORE": store_url, "HITL_CONFIG": str(HERE / "hitl.yaml")}
        env["SHOP_REFUNDS_LOG"] = f"{work}/refunds.log"
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `python` in hitl.yaml
        gateway = StdioServerParameters(command=sys.executable, args=["-m", "hitl", "mcp"], env=env, cwd=str(HERE))
        async with stdio_client(gateway) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            print("tools:", ", ".join(t.name for t in (await client.list_tools()).tools))
            print("lookup:", text(await client.call_tool("look_up_order", {"order_id": "78291"})))
            refund = client.call_tool("refund", {"order_id": "78291", "amount": 120})
            result, _ = await asyncio.gather(refund, reviewer(store_url))
            print("refund:", text(result))
        print("effects:", Path(work, "refunds.log").read_text().strip())


if __name__ == "__main__":
    asyncio.run(main())
