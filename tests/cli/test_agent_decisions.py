"""``hitl resume`` on an approval no workflow run owns (an agent's, an MCP client's): the CLI says only the decision
was recorded and who runs the call, never "completed session ..." (nothing of ours ran)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl import open_store
from hitl.testing import FakeClock, make_approval
from tests.cli.conftest import REFUND, Cli

CONFIG = str(REFUND.parent / "hitl.yaml")


def mcp_approval(tmp_path: Path, session: str) -> str:
    async def create() -> str:
        store = open_store(f"sqlite:///{tmp_path}/hitl.db")
        a = make_approval(now=FakeClock().now(), session_id=session)
        a = a.model_copy(update={"metadata": {"framework": "mcp", "call_id": "c-1"}})
        created, _ = await store.approvals.create(a)
        await store.close()
        return created.id

    return asyncio.run(create())


def test_an_agents_approval_reads_as_a_recorded_decision(cli: Cli, tmp_path: Path) -> None:
    aid = mcp_approval(tmp_path, "mcp-s1")
    r = cli("resume", aid, "--approve", "--as", "U_SUPPORT1", HITL_CONFIG=CONFIG)
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith(f"approved  approval {aid}") and "the mcp that asked runs the call" in first
    assert "completed" not in r.out and "session mcp-s1" not in first

    other = mcp_approval(tmp_path, "mcp-s2")
    body = cli("resume", other, "--reject", "--reason", "no", "--as", "U_SUPPORT1", "--json", HITL_CONFIG=CONFIG)
    assert body.code == 3
    got = body.json()
    assert (got["status"], got["run"], got["approval_id"]) == ("rejected", None, other)
    assert "told it did not run" in got["next"]
