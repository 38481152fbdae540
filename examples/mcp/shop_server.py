"""A small shop as an MCP server (what `hitl mcp` fronts in this example): an order lookup and a refund that writes
its effect to refunds.log beside the store. Any MCP server works the same way."""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

shop = MCPServer("shop")
LOG = Path(os.environ.get("SHOP_REFUNDS_LOG", "refunds.log"))


@shop.tool()
def look_up_order(order_id: str) -> str:
    """Read an order from the shop."""
    return f"order {order_id}: shipped, paid 120"


@shop.tool()
def refund(order_id: str, amount: float) -> str:
    """Refund part or all of an order."""
    with LOG.open("a") as log:
        log.write(f"{order_id} {amount:g}\n")
    return f"refunded {amount:g} on order {order_id}"


if __name__ == "__main__":
    shop.run("stdio")
