"""One agent process for the kill -9 tests: `start` runs the agent until it waits for a person, prints `waiting`
and then blocks (to be killed); `finish` is a new process that takes over the session and lets the run finish.

Usage: python -m tests.adapters.agent_process <harness> start|finish <folder>
(harness: strands-inline, strands-interrupt, openai-agents, pydantic-ai)
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.agent_world import (
    ADAPTER_CONFIG,
    AgentHarness,
    AgentRun,
    AgentWorld,
    Ledger,
    refund,
)

CALLS = [refund("c1", "K1", 45)]
SESSION = "proc-session"


def harness(name: str, world: AgentWorld, folder: Path) -> AgentHarness:
    if name == "strands-inline":
        from tests.adapters.strands_harness import InlineHarness

        return InlineHarness(world)
    if name == "strands-interrupt":
        from tests.adapters.strands_harness import InterruptHarness

        return InterruptHarness(world, folder / "sessions")
    if name == "openai-agents":
        from tests.adapters.openai_agents_harness import OpenAIAgentsHarness

        return OpenAIAgentsHarness(world)
    from tests.adapters.pydantic_ai_harness import PydanticAIHarness

    return PydanticAIHarness(world)


async def main(name: str, mode: str, folder: Path) -> None:
    world = AgentWorld(
        open_store=lambda: SqliteStore(folder / "hitl.db"),
        clock=SystemClock(),  # type: ignore[arg-type]  # a real process runs on real time
        ledger=Ledger(folder / "effects.db"),
        config=parse_config(ADAPTER_CONFIG),
    )
    h = harness(name, world, folder)
    if mode == "start":
        await h.start(CALLS, session=SESSION)
        print("waiting", flush=True)
        await asyncio.Event().wait()  # a real process, waiting: the test kills it with SIGKILL
    run = await h.restart(AgentRun(SESSION, CALLS, world.store()))
    print(json.dumps((await h.finish(run)).results), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
