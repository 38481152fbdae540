"""The Pydantic AI harness (the real SDK, a scripted FunctionModel) that tests/adapters/test_pydantic_ai.py runs the
adapter conformance suite with, and tests/adapters/agent_process.py runs as a process.

Apart from the test module so that collecting it imports no SDK (paid by each of `make test`'s workers, which all
collect every module): the test imports this when it runs."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from hitl.adapters.pydantic_ai import HitlRunner, HitlToolset
from hitl.engine.testing.conformance.agent_world import AgentWorld, ScriptedCall, Transcript
from tests.adapters.stopping import StoppingHarness

__all__ = ["PydanticAIHarness"]


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
