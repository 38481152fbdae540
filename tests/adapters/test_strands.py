"""Strands Agents (the real SDK, a scripted model): the native handler in both modes, and SlackAsk."""

from __future__ import annotations

import asyncio
from typing import Any

from hitl.engine.domain.models import DecisionKind
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.testing.conformance.adapters import AdapterConformance
from hitl.engine.testing.conformance.agent_world import AgentHarness, AgentWorld, ScriptedCall

# The SDK, its scripted model and the harnesses are in tests/adapters/strands_harness.py, imported by each test when
# it runs: collecting this module (in every xdist worker) loads no SDK.


async def test_slack_ask_in_humanintheloop_trust_runs_under_default_enable_trust(world: AgentWorld) -> None:
    from tests.adapters.strands_harness import ask_agent, until_waiting

    agent, task = await ask_agent(world, [ScriptedCall("c1", "refund", {"order_id": "T1", "amount": 10})], "ask-trust")
    await until_waiting(world, "ask-trust", task)
    (a,) = [x for x in (await world.store().approvals.list_pending()).items if x.session_id == "ask-trust"]
    assert not a.modifiable  # ask() can only say yes or no: no Modify is offered
    await world.service(world.store()).decide(DecideRequest(a.id, "U_S1", DecisionKind.TRUST))
    await asyncio.wait_for(task, 10)
    assert world.ledger.rows() == [("refund", "T1", 10.0)]


async def test_slack_ask_refuses_the_classifier_prompt_form(world: AgentWorld) -> None:
    """With a classifier the prompt reads ``Approve "refund" — <reason>?``: hitl cannot read it exactly, so the
    call is denied, and nothing is filed under another tool name."""
    from strands.vended_interventions.hitl.classifier import ClassifierResult

    from tests.adapters.strands_harness import ask_agent, transcript

    def classifier(event: Any) -> ClassifierResult:
        return ClassifierResult(requires_human_in_the_loop=True, reason="large amount")

    calls = [ScriptedCall("c1", "refund", {"order_id": "T2", "amount": 899})]
    agent, task = await ask_agent(world, calls, "ask-classified", classifier=classifier)
    await asyncio.wait_for(task, 10)
    assert world.ledger.rows() == []
    assert (await world.store().approvals.list_pending()).items == []
    assert "CONFIRMATION_FAILED" in transcript(agent).results["c1"]


class TestStrandsInline(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        from tests.adapters.strands_harness import InlineHarness

        return InlineHarness(world)


class TestStrandsInterrupt(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        from tests.adapters.strands_harness import InterruptHarness

        return InterruptHarness(world, world.ledger.path.parent / "sessions")
