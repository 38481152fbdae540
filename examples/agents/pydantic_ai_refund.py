"""Pydantic AI + hitl: deferred tool approvals. Run: python examples/agents/pydantic_ai_refund.py

The run stops with DeferredToolRequests; a reviewer modifies the amount; the run resumes (from any process) and the
tool runs once, with the edited arguments (ToolApproved(override_args=...)).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

sys.path.insert(0, str(Path(__file__).parent))
from setup import open_gate, refund, reviewer_edits_amount  # noqa: E402

from hitl.adapters.pydantic_ai import HitlRunner, HitlToolset  # noqa: E402


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls refund(order 78291, 120), then repeats what the tool answered."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)] if messages else []
    if returns:
        return ModelResponse(parts=[TextPart(str(returns[0].content))])
    return ModelResponse(parts=[ToolCallPart("refund", {"order_id": "78291", "amount": 120}, tool_call_id="c1")])


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        gate = open_gate(Path(folder))
        agent: Agent[None, str | DeferredToolRequests] = Agent(
            FunctionModel(scripted),
            output_type=[str, DeferredToolRequests],
            toolsets=[HitlToolset(FunctionToolset([refund]))],
        )
        runner = HitlRunner(agent, gate)
        stopped = await runner.run("Please refund order 78291", session="chat-43")
        assert isinstance(stopped.output, DeferredToolRequests)
        print(f"  run stopped for {len(stopped.output.approvals)} approval(s)")
        await reviewer_edits_amount(gate, 60)
        result = await runner.resume("chat-43")
        assert result is not None, "every approval is decided, so the run continues"
        print(f"  model: {result.output}")
        await gate.service.store.close()


if __name__ == "__main__":
    asyncio.run(main())
