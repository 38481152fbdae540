"""A ``source:`` rule's own ``tier``, ``role`` and ``quorum`` are what a failed answer asks: with the engine down,
the call goes to the people the rule names, as many as it names, never to the tool's usual reviewers alone. Through a
service built from hitl.yaml, its OPA source's address closed (nothing answers)."""

from __future__ import annotations

import socket
from pathlib import Path

from hitl import ApprovalService, ProposeRequest, load_config
from hitl.engine.storage.sqlite import SqliteStore
from hitl.testing import FakeClock

CONFIG = """\
roles: {finance: [U_FIN1, U_FIN2, U_FIN3], ops: [U_OPS1, U_OPS2]}
policy:
  tools: {refund: {tier: notify, role: ops}}
  rules:
    - name: desk
      tools: [refund]
      source: {opa: {url: 'http://127.0.0.1:PORT', path: hitl/refunds/decision, timeout: 1}}
      tier: escalate
      role: finance
      quorum: 2
"""


def _closed_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_engine_down_asks_the_rules_role_and_quorum(tmp_path: Path) -> None:
    path = tmp_path / "hitl.yaml"
    path.write_text(CONFIG.replace("PORT", str(_closed_port())))
    store = SqliteStore(tmp_path / "hitl.db")
    try:
        service = ApprovalService.from_config(load_config(path), store=store, clock=FakeClock(), config_path=str(path))
        asked = ProposeRequest(tool="refund", args={"amount": 1}, session_id="s", requester="agent")
        got = await service.propose(asked)
        v = got.verdict
        assert (str(v.tier), v.required_role, v.quorum) == ("escalate", "finance", 2), v
        assert got.approval is not None and not got.may_run
    finally:
        await store.close()
