"""Pydantic AI (the real SDK, a scripted FunctionModel): deferred tool approvals through hitl."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from hitl.adapters.pydantic_ai import HitlRunner, HitlToolset
from hitl.engine.testing.conformance.adapters import (
    AdapterConformance,
    AgentHarness,
    AgentWorld,
    ScriptedCall,
    Transcript,
)
from tests.adapters.stopping import StoppingHarness


def scripted(calls: list[ScriptedCall]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(c.tool, dict(c.args), tool_call_id=c.call_id) for c in calls])

    return FunctionModel(respond)


def tools(world: AgentWorld) -> FunctionToolset[Any]:
    return FunctionToolset(world.ledger.tools())


def transcript(messages: list[ModelMessage]) -> Transcript:
    results: dict[str, str] = {}
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, ToolReturnPart):
                    results[p.tool_call_id] = str(p.content)
    return Transcript(results)


class PydanticAIHarness(StoppingHarness):
    framework = "pydantic-ai"

    def runner(self, calls: list[ScriptedCall]) -> tuple[HitlRunner, Any]:
        store = self.world.store()
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            scripted(calls), output_type=[str, DeferredToolRequests], toolsets=[HitlToolset(tools(self.world))]
        )
        return HitlRunner(agent, self.world.gate(store)), store

    def stopped(self, result: Any) -> bool:
        return isinstance(result.output, DeferredToolRequests)

    def transcript(self, result: Any) -> Transcript:
        return transcript(result.all_messages())


class TestPydanticAI(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        return PydanticAIHarness(world)
