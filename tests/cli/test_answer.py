"""``hitl answer ID TEXT``: a question an agent asked (``ask_person``) answered from the terminal, recorded through
the decide path as the edit that adds the answer; refused, with nothing recorded, past ``max_chars`` or on a tool that
has no ``answer`` argument."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hitl import open_store
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import load_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.service import ApprovalService
from tests.cli.conftest import REFUND, Cli
from tests.refund_config import write_refund_config


def asked(tmp_path: Path, config: Path, tool: str, args: dict[str, object]) -> str:
    """An approval of ``tool`` proposed on the CLI's store, as the MCP gateway would."""

    async def propose() -> str:
        store = open_store(f"sqlite:///{tmp_path}/hitl.db")
        service = ApprovalService.from_config(load_config(config), store=store, clock=SystemClock())
        p = await service.propose(ProposeRequest(tool, args, session_id="mcp", requester="agent:alice"))
        await store.close()
        assert p.approval is not None
        return p.approval.id

    return asyncio.run(propose())


def read(tmp_path: Path, approval_id: str) -> tuple[Status, dict[str, object], list[DecisionKind]]:
    async def get() -> tuple[Status, dict[str, object], list[DecisionKind]]:
        store = open_store(f"sqlite:///{tmp_path}/hitl.db")
        a = await store.approvals.get(approval_id)
        await store.close()
        return a.status, dict(a.execute_args), [d.kind for d in a.decisions]

    return asyncio.run(get())


def test_hitl_answer_records_the_answer_once_and_only_on_a_question(cli: Cli, tmp_path: Path) -> None:
    text = (REFUND.parent / "hitl.yaml").read_text()
    # With the consequence module the refund tool names beside it: the test passed alone only when an earlier test
    # of the same worker had imported that module already.
    config = write_refund_config(
        tmp_path / "hitl.yaml", text + "\nmcp:\n  ask_person: {role: support, max_chars: 20}\n"
    )
    question = asked(tmp_path, config, "ask_person", {"question": "Which carrier? <!channel>"})
    refund = asked(tmp_path, config, "refund", {"order_id": "7", "customer_id": "C-1", "amount": 5, "reason": "late"})
    env = {"HITL_CONFIG": str(config)}

    long = cli("answer", question, "x" * 21, "--as", "U_SUPPORT1", **env)
    assert long.code != 0 and "answer: " in long.err and "too long" in long.err and "[invalid_input]" in long.err
    not_a_question = cli("answer", refund, "UPS", "--as", "U_SUPPORT1", **env)
    assert not_a_question.code != 0 and "answer: not an argument of this tool" in not_a_question.err
    assert read(tmp_path, question)[0] is Status.PENDING and read(tmp_path, refund)[0] is Status.PENDING

    done = cli("answer", question, "UPS, by noon", "--as", "U_SUPPORT1", "--json", **env)
    assert done.code == 0, done.err
    status, args, kinds = read(tmp_path, question)
    assert status is Status.APPROVED and kinds == [DecisionKind.MODIFY]
    assert args == {"question": "Which carrier? <!channel>", "answer": "UPS, by noon"}
    again = cli("answer", question, "DHL", "--as", "U_SUPPORT1", **env)
    assert again.code != 0 and read(tmp_path, question)[1]["answer"] == "UPS, by noon"  # answered once
