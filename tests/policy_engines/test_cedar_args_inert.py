"""A call's arguments reach Cedar as data, never as Cedar's own JSON escapes: an argument object shaped as an entity
reference (``{"__entity": ...}``) or an extension value (``{"__extn": ...}``) would be read by the engine as that
typed value, so an agent could forge an entity equal to the principal and slip past a rule. Such arguments make the
request one the engine cannot be asked: a person decides (fail closed). Through the real Cedar engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hitl import ApprovalService, ProposeRequest, load_config
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock

POLICIES = """\
@id("pay")
permit (principal, action == Action::"pay", resource);

@id("not-their-own")
@tier("approve")
forbid (principal, action == Action::"pay", resource)
unless { context.args.owner == principal };
"""

CONFIG = """\
policy:
  tools: {pay: {tier: auto}}
  rules:
    - name: desk
      source: {cedar: {policies: [desk.cedar]}}
"""

FORGED: list[dict[str, Any]] = [
    {"owner": {"__entity": {"type": "User", "id": "agent:riley"}}},
    {"owner": {"__extn": {"fn": "ip", "arg": "10.0.0.1"}}},
    {"owner": "agent:riley", "memo": [{"__entity": {"type": "User", "id": "root"}}]},
]


async def test_arguments_shaped_as_cedar_escapes_ask_a_person(tmp_path: Path) -> None:
    (tmp_path / "desk.cedar").write_text(POLICIES)
    (tmp_path / "hitl.yaml").write_text(CONFIG)
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        path = tmp_path / "hitl.yaml"
        service = ApprovalService.from_config(load_config(path), store=store, clock=FakeClock(), config_path=str(path))
        for i, args in enumerate(FORGED):
            asked = ProposeRequest(tool="pay", args=args, session_id=f"s{i}", requester="agent:riley")
            got = await service.propose(asked)
            assert str(got.verdict.tier) == "approve" and not got.may_run, (args, got.verdict)
    finally:
        await store.close()
