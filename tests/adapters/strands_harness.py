"""The Strands Agents harnesses (the real SDK, a scripted model: the native handler inline and with interrupts) and
the SlackAsk agent that tests/adapters/test_strands.py runs, and tests/adapters/agent_process.py runs as a process.

Apart from the test module so that collecting it imports no SDK (paid by each of `make test`'s workers, which all
collect every module): the tests import this when they run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from strands import Agent, tool
from strands.interventions.handler import InterventionHandler
from strands.models.model import Model
from strands.session.file_session_manager import FileSessionManager
from strands.vended_interventions.hitl import HumanInTheLoop

from hitl.adapters.ask_callback import SlackAsk
from hitl.adapters.strands import HitlIntervention, resume
from hitl.engine.agents.ask import Approvals
from hitl.engine.testing.conformance.agent_world import AgentRun, AgentWorld, ScriptedCall, Transcript, settle
from tests.waiting import eventually

__all__ = ["InlineHarness", "InterruptHarness", "ask_agent", "transcript", "until_waiting"]


class ScriptedModel(Model):
    """Calls the scripted tools on the first turn; after the tool results, answers with a final text."""

    def __init__(self, calls: list[ScriptedCall]) -> None:
        self.calls = calls

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model streams tool calls; no run asks it for structured output")

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any
    ) -> AsyncIterator[Any]:
        answered = bool(messages) and any("toolResult" in block for block in messages[-1]["content"])
        yield {"messageStart": {"role": "assistant"}}
        if answered:
            yield {"contentBlockDelta": {"delta": {"text": "done"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        for call in self.calls:
            yield {"contentBlockStart": {"start": {"toolUse": {"name": call.tool, "toolUseId": call.call_id}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(call.args)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def strands_tools(world: AgentWorld) -> list[Any]:
    return [tool(fn) for fn in world.ledger.tools()]


def scripted_agent(world: AgentWorld, calls: list[ScriptedCall], handler: InterventionHandler, **options: Any) -> Agent:
    """A Strands agent on the scripted model with the world's tools, ``handler`` its one intervention, printing
    nothing (``options``: the SDK's others, a session manager)."""
    return Agent(
        model=ScriptedModel(calls),
        tools=strands_tools(world),
        interventions=[handler],
        callback_handler=None,
        **options,
    )


def transcript(agent: Agent) -> Transcript:
    results: dict[str, str] = {}
    for message in agent.messages:
        for block in message["content"]:
            if "toolResult" in block:
                res = block["toolResult"]
                results[res["toolUseId"]] = " ".join(str(c.get("text", "")) for c in res["content"])
    return Transcript(results)


async def until_waiting(world: AgentWorld, session: str, task: asyncio.Task[Any]) -> None:
    store = world.store()

    async def waiting() -> bool:
        pending = (await store.approvals.list_pending(limit=200)).items
        return task.done() or any(a.session_id == session for a in pending)

    await eventually(waiting, what=f"session {session} to wait for a person", interval=0.005)


class InlineHarness:
    framework = "strands"
    modifies = True

    def __init__(self, world: AgentWorld) -> None:
        self.world = world

    def agent(self, run_calls: list[ScriptedCall], session: str) -> tuple[Agent, Any]:
        store = self.world.store()
        handler = HitlIntervention(self.world.gate(store), session=session, agent="support-bot")
        return scripted_agent(self.world, run_calls, handler), store

    async def start(self, calls: list[ScriptedCall], *, session: str) -> AgentRun:
        agent, store = self.agent(calls, session)
        task = asyncio.create_task(agent.invoke_async("go"))
        await until_waiting(self.world, session, task)
        return AgentRun(session, calls, store, {"agent": agent, "task": task})

    async def finish(self, run: AgentRun) -> Transcript:
        await run.state["task"]
        return transcript(run.state["agent"])

    async def finish_shared(self, run: AgentRun) -> Transcript | None:
        return await self.finish(run)  # each process waits inline on its own call

    async def crash(self, run: AgentRun) -> None:
        run.state["task"].cancel()
        await settle(run.state["task"])

    async def restart(self, run: AgentRun) -> AgentRun:
        return await self.start(run.calls, session=run.session)


class InterruptHarness:
    """The SDK's default, stateless mode: the agent stops; any process resumes it from the session manager."""

    framework = "strands"
    modifies = True

    def __init__(self, world: AgentWorld, sessions: Path) -> None:
        self.world = world
        self.sessions = sessions

    def agent(self, calls: list[ScriptedCall], session: str) -> tuple[Agent, HitlIntervention, Any]:
        store = self.world.store()
        handler = HitlIntervention(self.world.gate(store), session=session, mode="interrupt")
        manager = FileSessionManager(session_id=session, storage_dir=str(self.sessions))
        return scripted_agent(self.world, calls, handler, session_manager=manager), handler, store

    async def start(self, calls: list[ScriptedCall], *, session: str) -> AgentRun:
        agent, handler, store = self.agent(calls, session)
        result = await agent.invoke_async("go")
        return AgentRun(session, calls, store, {"agent": agent, "handler": handler, "result": result})

    async def finish(self, run: AgentRun) -> Transcript:
        agent, handler = run.state["agent"], run.state["handler"]
        if run.state["result"].stop_reason == "interrupt":
            result = await resume(agent, handler)
            assert result is not None, "every approval was decided, so the run must continue"
            assert result.stop_reason != "interrupt"
        return transcript(agent)

    async def finish_shared(self, run: AgentRun) -> Transcript | None:
        agent, handler = run.state["agent"], run.state["handler"]
        if run.state["result"].stop_reason == "interrupt" and await resume(agent, handler) is None:
            return None  # another process continued the run
        return transcript(agent)

    async def crash(self, run: AgentRun) -> None:
        run.state.clear()  # nothing survives but the store and the session files

    async def restart(self, run: AgentRun) -> AgentRun:
        agent, handler, store = self.agent(run.calls, run.session)
        stopped = type("Stopped", (), {"stop_reason": "interrupt"})()
        return AgentRun(run.session, run.calls, store, {"agent": agent, "handler": handler, "result": stopped})


async def ask_agent(world: AgentWorld, calls: list[ScriptedCall], session: str, **hitl: Any) -> tuple[Agent, Any]:
    ask = SlackAsk(Approvals(world.service(world.store())), session=session)
    handler = HumanInTheLoop(allowed_tools=["look_up_order"], ask=ask, **hitl)
    agent = scripted_agent(world, calls, handler)
    return agent, asyncio.create_task(agent.invoke_async("go"))
