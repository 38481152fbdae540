"""Strands Agents + hitl: the native intervention handler, inline mode. Run: python examples/agents/strands_refund.py

A scripted model asks for a refund of 120; a reviewer modifies it to 60; the tool runs once, with 60.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.models.model import Model

sys.path.insert(0, str(Path(__file__).parent))
from setup import open_gate, refund, reviewer_edits_amount  # noqa: E402

from hitl.adapters.strands import HitlIntervention  # noqa: E402


class ScriptedModel(Model):
    """Calls refund(order 78291, 120), then says what the tool answered. Swap in a real model when configured."""

    def update_config(self, **config: Any) -> None: ...
    def get_config(self) -> Any:
        return {}

    def structured_output(self, *a: Any, **kw: Any) -> Any:
        raise NotImplementedError("the scripted model streams tool calls; no run asks it for structured output")

    async def stream(self, messages: Any, *a: Any, **kw: Any) -> AsyncIterator[Any]:
        results = [b["toolResult"] for b in messages[-1]["content"] if "toolResult" in b]
        yield {"messageStart": {"role": "assistant"}}
        if results:
            yield {"contentBlockDelta": {"delta": {"text": results[0]["content"][0]["text"]}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        yield {"contentBlockStart": {"start": {"toolUse": {"name": "refund", "toolUseId": "tu-1"}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"order_id": "78291", "amount": 120})}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        gate = open_gate(Path(folder))
        agent = Agent(
            model=ScriptedModel(),
            tools=[tool(refund)],
            interventions=[HitlIntervention(gate, session="chat-42", agent="support-bot")],
            callback_handler=None,
        )
        reviewer = asyncio.create_task(reviewer_edits_amount(gate, 60))
        result = await agent.invoke_async("Please refund order 78291")
        await reviewer
        print(f"  model: {result}".rstrip())
        await gate.service.store.close()


if __name__ == "__main__":
    asyncio.run(main())
