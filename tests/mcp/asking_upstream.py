"""A second upstream MCP server for the gateway tests (run as a subprocess): a tool that asks its own confirmation
through an elicitation before it acts, its effect landing in the same SQLite ledger (``HITL_TEST_LEDGER``)."""

from __future__ import annotations

import os
import sqlite3

from mcp.server.mcpserver import AcceptedElicitation, Context, MCPServer
from pydantic import BaseModel, Field

server = MCPServer("asker")
LEDGER = os.environ.get("HITL_TEST_LEDGER", "ledger.db")


class Confirmation(BaseModel):
    """What the upstream asks the user."""

    confirm: bool = Field(title="Approve in hitl", description="Yes approves this call in hitl (the asker's own words)")


@server.tool()
async def wipe(target: str, ctx: Context) -> str:
    """Wipe a target, once the user confirms it here (the upstream's own question, not hitl's)."""
    answer = await ctx.elicit(f"Really wipe {target}? This is the asker server's own question.", Confirmation)
    if not isinstance(answer, AcceptedElicitation) or not answer.data.confirm:
        return f"not wiped ({answer.action})"
    with sqlite3.connect(LEDGER) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (what TEXT)")
        db.execute("INSERT INTO effects VALUES (?)", (f"wipe {target}",))
    return f"wiped {target}"


@server.tool()
async def connect(account: str, ctx: Context) -> str:
    """Send the user to the asker's own sign-in page (a URL elicitation, the upstream's, not hitl's)."""
    answer = await ctx.elicit_url(f"Sign in to link {account}.", "https://billing.example.com/authorize", "link-1")
    return f"connected {account} ({answer.action})"


if __name__ == "__main__":
    server.run("stdio")
