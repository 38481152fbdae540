"""One agent process for the cross-process LangGraph tests: `start` pauses a thread, `resume` continues it, `watch`
runs an AgentWatcher until the thread no longer waits on hitl (or 60 s pass).

Usage: python -m tests.adapters.langgraph_process start|resume|watch <folder>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.agent_world import ADAPTER_CONFIG, AgentWorld, Ledger, refund
from tests.adapters.test_langgraph import build
from tests.waiting import eventually


async def main(mode: str, folder: Path) -> None:
    world = AgentWorld(
        open_store=lambda: SqliteStore(folder / "hitl.db"),
        clock=SystemClock(),  # type: ignore[arg-type]  # a real process runs on real time
        ledger=Ledger(folder / "effects.db"),
        config=parse_config(ADAPTER_CONFIG),
    )
    store = world.open_store()
    gate = world.gate(store)
    async with aiosqlite.connect(folder / "checkpoints.db") as conn:
        graph = build(world, [refund("c1", "P1", 45)], AsyncSqliteSaver(conn), gate)
        config: Any = {"configurable": {"thread_id": "proc-thread"}}
        if mode == "start":
            from langchain_core.messages import HumanMessage

            out = await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
            print("paused" if "__interrupt__" in out else "finished")
        elif mode == "resume":
            from hitl.adapters.langgraph import Resumer

            done = await Resumer(graph, gate).resume("proc-thread")
            print("nothing to resume" if done is None else f"resumed: {done['messages'][-1].content}")
        else:
            await watch(graph, gate)
    await store.close()


async def watch(graph: Any, gate: Any) -> None:
    from hitl.adapters.langgraph import Resumer
    from hitl.engine.agents.runs import AgentWatcher

    async def report(thread: str, out: Any) -> None:
        print(f"resumed {thread}: {out['messages'][-1].content}", flush=True)

    resumer = Resumer(graph, gate, on_result=report)
    watcher = AgentWatcher(gate, [resumer], interval=0.1)
    print("watching", flush=True)
    watcher.start()

    async def done() -> bool:
        return not await resumer.waiting_for("proc-thread")

    await eventually(done, what="the thread to be resumed", timeout=60)
    await asyncio.sleep(0.3)  # a last round: a second watcher must find nothing left to do
    await watcher.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
