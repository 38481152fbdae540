"""LangGraph + hitl: HitlToolNode pauses the thread with interrupt(); the Resumer resumes it exactly once.
Run: python examples/agents/langgraph_refund.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiosqlite
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

sys.path.insert(0, str(Path(__file__).parent))
from setup import open_gate, refund, reviewer_edits_amount  # noqa: E402

from hitl.adapters.langgraph import HitlToolNode, Resumer  # noqa: E402


def model(state: MessagesState) -> dict[str, Any]:
    """A scripted model: calls refund(order 78291, 120), then repeats what the tool answered."""
    last = state["messages"][-1]
    if isinstance(last, ToolMessage):
        return {"messages": [AIMessage(str(last.content))]}
    call = {"name": "refund", "args": {"order_id": "78291", "amount": 120}, "id": "c1", "type": "tool_call"}
    return {"messages": [AIMessage("", tool_calls=[call])]}


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        gate = open_gate(Path(folder))
        g = StateGraph(MessagesState)
        g.add_node("model", model)
        g.add_node("tools", HitlToolNode([tool(refund)], gate))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", route, ["tools", END])
        g.add_edge("tools", "model")
        async with aiosqlite.connect(Path(folder) / "checkpoints.db") as conn:
            graph = g.compile(checkpointer=AsyncSqliteSaver(conn))
            config: Any = {"configurable": {"thread_id": "chat-45"}}
            first = await graph.ainvoke({"messages": [HumanMessage("Please refund order 78291")]}, config)
            print(f"  thread paused: {len(first['__interrupt__'])} interrupt(s)")
            await reviewer_edits_amount(gate, 60)
            done = await Resumer(graph, gate).resume("chat-45")
            assert done is not None, "every approval is decided, so the thread resumes"
            print(f"  model: {done['messages'][-1].content}")
        await gate.service.store.close()


if __name__ == "__main__":
    asyncio.run(main())
