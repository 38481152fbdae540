"""Approvals show which framework and agent session asked: on the card (escaped), in `hitl show --json` and in the
audit log."""

from __future__ import annotations

import json

from hitl.api.models import ApprovalView
from hitl.bot.views.blocks import card
from hitl.cli.output import approval_json
from hitl.engine.agents.gate import ToolCall
from hitl.engine.domain.presentation import present
from hitl.engine.testing.conformance.agent_world import AgentWorld


async def test_the_card_show_and_audit_name_the_asking_framework_and_session(world: AgentWorld) -> None:
    store = world.store()
    gate = world.gate(store)
    call = ToolCall(
        "refund",
        {"order_id": "Q1", "amount": 30},
        session="chat-9",
        framework="strands",
        call_id="tu-1",
        agent="support <!channel> bot",
    )
    ticket = await gate.check(call)
    assert ticket.pending and ticket.approval is not None
    text = json.dumps(card(ticket.approval, now=world.clock.now()))
    assert "via strands agent support &lt;!channel&gt; bot, session chat-9" in text
    assert "<!channel>" not in text  # the agent's name is untrusted text: inert on the card
    shown = approval_json(ApprovalView.of(ticket.approval, present(ticket.approval)))
    assert shown["asked_by"] == {"framework": "strands", "agent": "support <!channel> bot", "call_id": "tu-1"}
    assert shown["modifiable"] is True
    [created] = [e for e in await store.audit.entries(approval_id=ticket.approval.id) if e.event == "created"]
    assert created.detail.endswith("via strands agent support <!channel> bot, session chat-9")
