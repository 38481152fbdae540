"""OpenAI Agents SDK + hitl: needs_approval interruptions. Run: python examples/agents/openai_agents_refund.py

The run stops with an interruption; a reviewer modifies the amount; the stored RunState resumes (from any process)
and the tool runs once, with the edited arguments.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

sys.path.insert(0, str(Path(__file__).parent))
from setup import open_gate, refund, reviewer_edits_amount  # noqa: E402

from hitl.adapters.openai_agents import HitlRunner, gated  # noqa: E402


class ScriptedModel(Model):
    """Calls refund(order 78291, 120), then repeats what the tool answered."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> ModelResponse:
        last = input[-1] if isinstance(input, list) and input else {}
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            text = ResponseOutputText(type="output_text", text=str(last["output"]), annotations=[])
            msg = ResponseOutputMessage(id="m1", type="message", role="assistant", status="completed", content=[text])
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)
        args = json.dumps({"order_id": "78291", "amount": 120})
        call = ResponseFunctionToolCall(type="function_call", call_id="c1", name="refund", arguments=args, id="fc1")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError("the scripted model answers through get_response; no run streams")


async def main() -> None:
    set_tracing_disabled(True)  # the example sends nothing off the machine
    with tempfile.TemporaryDirectory() as folder:
        gate = open_gate(Path(folder))
        agent: Agent[Any] = Agent(name="support-bot", model=ScriptedModel(), tools=gated([function_tool(refund)]))
        runner = HitlRunner(agent, gate)
        stopped = await runner.run("Please refund order 78291", session="chat-44")
        print(f"  run stopped for {len(stopped.interruptions)} approval(s)")
        await reviewer_edits_amount(gate, 60)
        result = await runner.resume("chat-44")
        assert result is not None, "every approval is decided, so the run continues"
        print(f"  model: {result.final_output}")
        await gate.service.store.close()


if __name__ == "__main__":
    asyncio.run(main())
