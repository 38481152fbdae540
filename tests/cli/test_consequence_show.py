"""``hitl show`` prints a tool's consequence as "what will happen", apart from hitl's own lines, as plain text
(hostile strings it returned stay inert: no terminal control reaches the screen), and ``--json`` carries it with
its digest."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage import open_store
from hitl.testing import FakeClock
from tests.cli.conftest import Cli

YAML = """
roles: {support: [U_SUPPORT1]}
policy:
  tools:
    refund: {role: support, consequence: "tests.consequence_tools:refund"}
    note: {role: support, consequence: "tests.consequence_tools:hostile"}
"""


async def _propose(store_url: str, config: Path, tool: str, args: dict[str, object]) -> str:
    store = open_store(store_url)
    try:
        svc = ApprovalService.from_config(load_config(config), store=store, clock=FakeClock())
        p = await svc.propose(ProposeRequest(tool, args, session_id="s"))
        assert p.approval is not None
        return p.approval.id
    finally:
        await store.close()


def test_hitl_show_prints_what_will_happen(cli: Cli, env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "hitl.yaml"
    config.write_text(YAML)
    aid = asyncio.run(_propose(env["HITL_STORE"], config, "refund", {"order_id": "A1", "amount": 30}))
    shown = cli("show", aid, HITL_CONFIG=str(config))
    assert shown.code == 0, shown.err
    lines = [line.strip() for line in shown.out.splitlines()]
    at = lines.index("what will happen  (computed by the tool's own code from these arguments; shown as text)")
    assert lines[at + 1 : at + 6] == [
        "Order A1 keeps 170.00 refundable",
        "refundable: 200.0 → 170.0",
        'order: "A1" · refund: 30.0',
        "- balance 200.00",
        "+ balance 170.00",
    ]
    as_json = cli("show", aid, "--json", HITL_CONFIG=str(config)).json()
    assert as_json["consequence"]["summary"] == "Order A1 keeps 170.00 refundable"
    assert as_json["view"]["consequence"] == {"outcome": "shown", "sha256": as_json["consequence"]["sha256"]}
    note = "\x1b[31mred\x1b[0m \u202eevird\u202c <@U_FIN1> p\u0430ypal.com"
    hostile = asyncio.run(_propose(env["HITL_STORE"], config, "note", {"note": note}))
    out = cli("show", hostile, HITL_CONFIG=str(config)).out
    assert "\x1b" not in out and "\u202e" not in out and "[U+202E]" in out
    assert "look closely:" in out and "Cyrillic" in out
