"""The OpenAI Agents SDK harness (the real SDK, a scripted model) that tests/adapters/test_openai_agents.py runs the
adapter conformance suite with, and tests/adapters/agent_process.py runs as a process.

Apart from the test module so that collecting it imports no SDK (~2.3 s of CPU, paid by each of `make test`'s
workers, which all collect every module): the test imports this when it runs."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from hitl.adapters.openai_agents import HitlRunner, gated
from hitl.engine.testing.conformance.agent_world import AgentWorld, ScriptedCall, Transcript
from tests.adapters.stopping import StoppingHarness

__all__ = ["OpenAIAgentsHarness"]


class ScriptedModel(Model):
    def __init__(self, calls: list[ScriptedCall]) -> None:
        self.calls = calls

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kw: Any) -> ModelResponse:
        items = input if isinstance(input, list) else []
        last = items[-1] if items else {}
        answered = isinstance(last, dict) and last.get("type") == "function_call_output"
        if answered:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            msg = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed", content=[text])
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)
        out = [
            ResponseFunctionToolCall(
                type="function_call", call_id=c.call_id, name=c.tool, arguments=json.dumps(c.args), id=f"fc_{c.call_id}"
            )
            for c in self.calls
        ]
        return ModelResponse(output=list(out), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError("the scripted model answers through get_response; no run streams")


def tools(world: AgentWorld) -> list[Any]:
    return [function_tool(fn) for fn in world.ledger.tools()]


def transcript(result: Any) -> Transcript:
    results: dict[str, str] = {}
    for item in result.to_input_list():
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            results[str(item["call_id"])] = str(item.get("output"))
    return Transcript(results)


class OpenAIAgentsHarness(StoppingHarness):
    framework = "openai-agents"

    def runner(self, calls: list[ScriptedCall]) -> tuple[HitlRunner, Any]:
        store = self.world.store()
        agent: Agent[Any] = Agent(name="support", model=ScriptedModel(calls), tools=gated(tools(self.world)))
        return HitlRunner(agent, self.world.gate(store)), store

    def stopped(self, result: Any) -> bool:
        return bool(result.interruptions)

    def transcript(self, result: Any) -> Transcript:
        return transcript(result)
