"""OpenAI Agents SDK (the real SDK, a scripted model): needs_approval interruptions through hitl."""

from __future__ import annotations

from hitl.engine.testing.conformance.adapters import AdapterConformance
from hitl.engine.testing.conformance.agent_world import AgentHarness, AgentWorld


class TestOpenAIAgents(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        # Imported here: collecting this module (in every xdist worker) loads no SDK, only running it does.
        from tests.adapters.openai_agents_harness import OpenAIAgentsHarness

        return OpenAIAgentsHarness(world)
