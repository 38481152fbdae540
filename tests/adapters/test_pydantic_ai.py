"""Pydantic AI (the real SDK, a scripted FunctionModel): deferred tool approvals through hitl."""

from __future__ import annotations

from hitl.engine.testing.conformance.adapters import AdapterConformance
from hitl.engine.testing.conformance.agent_world import AgentHarness, AgentWorld


class TestPydanticAI(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        # Imported here: collecting this module (in every xdist worker) loads no SDK, only running it does.
        from tests.adapters.pydantic_ai_harness import PydanticAIHarness

        return PydanticAIHarness(world)
