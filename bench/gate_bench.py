"""Gate overhead: what a hitl adapter adds to an allowed (AUTO) tool call, per framework, per store.

Each round runs the same agent three times, interleaved: with hitl's adapter, with the framework's own hook doing
nothing (the floor: what the framework's intervention machinery costs, none of it hitl's), and with no intervention
(the named peer: the framework on its own), each a scripted model making CALLS allowed tool calls in one turn; and
CALLS allowed calls through ``gate.check`` alone; on every store (SQLite, Redis, PostgreSQL). The overhead per call
is (gated - plain) / CALLS in CPU time of this process (the store's own work in redis-server or PostgreSQL is not
counted; for SQLite it is, being in-process). Targets: at most 25 µs per call on SQLite, 50 µs on Redis and
PostgreSQL; and on every store, what an adapter adds beyond the gate's own decision and the floor (gated - floor -
``gate.check`` alone, CPU time, paired within each round) at most 50 µs. (LangGraph's adapter replaces the
framework's tool node instead of using its hook: nothing is subtracted for it but ``gate.check``.)

The tool is a coroutine function. A plain function runs in a worker thread on both sides (every framework and hitl's
own AUTO path hand sync tools to a thread), and the GIL hand-offs of 200 thread hops vary by ±100 µs per call from one
run to the next on a 2-core VM: noise larger than the figure being measured, and none of it hitl's. Even so, single
rounds vary by tens of µs, so the verdict is the median of many paired rounds, shown with the 95% confidence
interval of that median (order statistics, no distribution assumed).

Run with `make bench` (or `.venv/bin/python bench/gate_bench.py [--rounds 31 --calls 200]`). Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import heading, median, median_ci, row  # noqa: E402
from every_store import every_store  # noqa: E402
from report import Bar, bar, chart, report  # noqa: E402

from hitl.engine.agents.gate import ToolCall, ToolGate  # noqa: E402
from hitl.engine.clocks import SystemClock  # noqa: E402
from hitl.engine.config.hitl_yaml import parse_config  # noqa: E402
from hitl.engine.ports import Store  # noqa: E402
from hitl.engine.service import ApprovalService  # noqa: E402

TARGETS_US = {"SQLite": 25.0, "Redis": 50.0, "PostgreSQL": 50.0}
"""What an allowed call may add through an adapter, per store (the store's own work counts on SQLite: in-process)."""
BEYOND_CHECK_US = 50.0
"""What an adapter may add to an allowed call beyond ``gate.check`` alone, on every store (CPU time, medians)."""
POLICY = parse_config("policy: {allowed_tools: [look_up_order], tools: {refund: {tier: approve}}}")


async def look_up_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


Runner = Callable[[bool, int], Awaitable[None]]


def strands_runner(gate: ToolGate, *, noop: bool = False) -> Runner:
    """With ``noop``, the "gated" side is a handler that lets every call proceed without asking hitl: what the
    framework's own intervention machinery costs, the part of the overhead that is not hitl's."""
    from strands import Agent, tool
    from strands.interventions import InterventionHandler, Proceed
    from strands.models.model import Model

    from hitl.adapters.strands import HitlIntervention

    class Noop(InterventionHandler):
        @property
        def name(self) -> str:
            return "noop"

        async def before_tool_call(self, event: Any, **kw: Any) -> Proceed:
            return Proceed()

        async def after_tool_call(self, event: Any, **kw: Any) -> Proceed:
            return Proceed()  # hitl's handler has both hooks: the floor has both too

    class Scripted(Model):
        def __init__(self, calls: int) -> None:
            self.calls = calls

        def update_config(self, **kw: Any) -> None: ...
        def get_config(self) -> Any:
            return {}

        def structured_output(self, *a: Any, **kw: Any) -> Any:
            raise NotImplementedError("the scripted model streams tool calls; no run asks it for structured output")

        async def stream(self, messages: Any, *a: Any, **kw: Any) -> AsyncIterator[Any]:
            yield {"messageStart": {"role": "assistant"}}
            if any("toolResult" in b for b in messages[-1]["content"]):
                yield {"contentBlockDelta": {"delta": {"text": "done"}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
                return
            for i in range(self.calls):
                yield {"contentBlockStart": {"start": {"toolUse": {"name": "look_up_order", "toolUseId": f"t{i}"}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"order_id": str(i)})}}}}
                yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}

    async def run(gated: bool, calls: int) -> None:
        handler = Noop() if noop else HitlIntervention(gate, session=uuid.uuid4().hex)
        handlers: list[Any] = [handler] if gated else []
        agent = Agent(model=Scripted(calls), tools=[tool(look_up_order)], interventions=handlers, callback_handler=None)
        await agent.invoke_async("go")

    return run


def pydantic_ai_runner(gate: ToolGate, *, noop: bool = False) -> Runner:
    """With ``noop``, the "gated" side wraps the tools in a wrapper toolset that calls through: the framework's own
    hook (the one hitl's ``HitlToolset`` uses), doing nothing."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset, WrapperToolset

    from hitl.adapters.pydantic_ai import HitlRunner, HitlToolset

    class Noop(WrapperToolset[Any]):
        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            return await super().call_tool(name, tool_args, ctx, tool)

    def model_for(calls: int) -> FunctionModel:
        def respond(messages: Any, info: Any) -> ModelResponse:
            if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[TextPart("done")])
            parts = [ToolCallPart("look_up_order", {"order_id": str(i)}, tool_call_id=f"c{i}") for i in range(calls)]
            return ModelResponse(parts=list(parts))

        return FunctionModel(respond)

    async def run(gated: bool, calls: int) -> None:
        tools = FunctionToolset([look_up_order])
        if gated and noop:
            await Agent(model_for(calls), toolsets=[Noop(tools)]).run("go")
        elif gated:
            agent: Any = Agent(model_for(calls), toolsets=[HitlToolset(tools)])
            await HitlRunner(agent, gate).run("go", session=uuid.uuid4().hex)
        else:
            await Agent(model_for(calls), toolsets=[tools]).run("go")

    return run


def openai_agents_runner(gate: ToolGate, *, noop: bool = False) -> Runner:
    """With ``noop``, the "gated" side's tools have the two hooks hitl's ``gated`` sets (``needs_approval`` and the
    invocation), each passing straight through."""
    import dataclasses

    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from hitl.adapters.openai_agents import HitlRunner, gated

    set_tracing_disabled(True)

    class Scripted(Model):
        def __init__(self, calls: int) -> None:
            self.calls = calls

        async def get_response(self, system_instructions: Any, input: Any, *a: Any, **kw: Any) -> ModelResponse:
            last = input[-1] if isinstance(input, list) and input else {}
            if isinstance(last, dict) and last.get("type") == "function_call_output":
                text = ResponseOutputText(type="output_text", text="done", annotations=[])
                msg = ResponseOutputMessage(
                    id="m", type="message", role="assistant", status="completed", content=[text]
                )
                return ModelResponse(output=[msg], usage=Usage(), response_id=None)
            out = [
                ResponseFunctionToolCall(
                    type="function_call", call_id=f"c{i}", name="look_up_order", arguments=f'{{"order_id": "{i}"}}'
                )
                for i in range(self.calls)
            ]
            return ModelResponse(output=list(out), usage=Usage(), response_id=None)

        def stream_response(self, *a: Any, **kw: Any) -> Any:
            raise NotImplementedError("the scripted model answers through get_response; no run streams")

    def passing(tool: Any) -> Any:
        invoke = tool.on_invoke_tool

        async def needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
            return False

        async def on_invoke(ctx: Any, raw: str) -> Any:
            return await invoke(ctx, raw)

        on_invoke.__annotations__ = {"ctx": Any, "raw": str, "return": Any}  # as hitl's wrapper: resolved once
        return dataclasses.replace(tool, on_invoke_tool=on_invoke, needs_approval=needs_approval)

    async def run(is_gated: bool, calls: int) -> None:
        tools = [function_tool(look_up_order)]
        if is_gated and noop:
            hooked: Any = Agent(name="b", model=Scripted(calls), tools=[passing(t) for t in tools])
            await Runner.run(hooked, "go")
        elif is_gated:
            agent: Any = Agent(name="b", model=Scripted(calls), tools=gated(tools))
            await HitlRunner(agent, gate).run("go", session=uuid.uuid4().hex)
        else:
            plain: Any = Agent(name="b", model=Scripted(calls), tools=list(tools))
            await Runner.run(plain, "go")

    return run


def langgraph_runner(gate: ToolGate, *, noop: bool = False) -> Runner:
    """With ``noop``, the "gated" side is the prebuilt ``ToolNode`` with a tool-call wrapper that calls through: the
    framework's own hook around each call, doing nothing (hitl's ``HitlToolNode`` replaces the node instead)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    from hitl.adapters.langgraph import HitlToolNode

    def graph(node: Any, calls: int) -> Any:
        def model(state: MessagesState) -> dict[str, Any]:
            if isinstance(state["messages"][-1], ToolMessage):
                return {"messages": [AIMessage("done")]}
            tcs = [{"name": "look_up_order", "args": {"order_id": str(i)}, "id": f"c{i}"} for i in range(calls)]
            return {"messages": [AIMessage("", tool_calls=tcs)]}

        g = StateGraph(MessagesState)
        g.add_node("model", model)
        g.add_node("tools", node)
        g.add_edge(START, "model")
        g.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END])
        g.add_edge("tools", "model")
        return g.compile(checkpointer=InMemorySaver())

    async def run(gated: bool, calls: int) -> None:
        tools = [tool(look_up_order)]
        if gated and noop:

            async def through(request: Any, execute: Any) -> Any:
                return await execute(request)

            node: Any = ToolNode(tools, awrap_tool_call=through)
        else:
            node = HitlToolNode(tools, gate) if gated else ToolNode(tools)
        config: Any = {"configurable": {"thread_id": uuid.uuid4().hex}}
        await graph(node, calls).ainvoke({"messages": [HumanMessage("go")]}, config)

    return run


FRAMEWORKS: dict[str, Callable[..., Runner]] = {
    "strands": strands_runner,
    "langgraph": langgraph_runner,
    "openai-agents": openai_agents_runner,
    "pydantic-ai": pydantic_ai_runner,
}
"""Each framework's runner: with hitl's adapter, or (``noop=True``) with its own hook doing nothing: the floor."""
FLOORS = {
    "strands": "a no-op handler",
    "langgraph": "a no-op tool-call wrapper",
    "openai-agents": "no-op tool hooks",
    "pydantic-ai": "a no-op wrapper toolset",
}
"""What each framework's floor is: its own hook, as hitl's adapter uses it, doing nothing."""
REPLACES_THE_NODE = {"langgraph"}
"""Adapters that do not go through the framework's hook (LangGraph: ``HitlToolNode`` replaces ``ToolNode``): what
the hook costs is not hitl's to be excused, so nothing is subtracted for them (their floor is shown all the same)."""
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


async def checks(gate: ToolGate, calls: int) -> float:
    """CPU time of ``calls`` allowed calls through ``gate.check`` alone, one after another, in a session of their
    own (as each agent run has), in seconds."""
    session = uuid.uuid4().hex
    t0 = time.process_time()
    for i in range(calls):
        args = {"order_id": str(i)}
        await gate.check(
            ToolCall("look_up_order", args, session=session, framework="bench", call_id=f"c{i}", schema=SCHEMA)
        )
    return time.process_time() - t0


async def measure(store: Store, name: str, rounds: int, calls: int, target: float) -> tuple[list[float], list[float]]:
    """The overheads per call of each round, in µs, of hitl's adapter and of the framework's floor (both against
    the framework alone), printed with their medians, those medians' confidence intervals, and what the adapter adds
    beyond ``gate.check`` alone and the floor: all four measured in every round."""
    gate = ToolGate(ApprovalService.from_config(POLICY, store=store, clock=SystemClock()))
    hitl, floor = FRAMEWORKS[name](gate), FRAMEWORKS[name](gate, noop=True)
    sides: dict[str, Callable[[], Awaitable[object]]] = {
        "plain": lambda: hitl(False, calls),
        "floor": lambda: floor(True, calls),
        "hitl": lambda: hitl(True, calls),
        "check": lambda: checks(gate, calls),
    }
    for warm in (hitl, floor):  # both paths once (imports, caches)
        await warm(True, 5)
        await warm(False, 5)
    spent: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(rounds):
        # Interleaved, each round in another order (rotated, then reversed): every side sees the same machine state
        # on the whole; on CPU time with the collector paused, so none pays for another's garbage or for other
        # processes' time slices.
        order = list(sides)[r % 4 :] + list(sides)[: r % 4]
        if (r // 4) % 2:
            order.reverse()
        gc.collect()
        gc.disable()
        try:
            for side in order:
                t0 = time.process_time()
                await sides[side]()
                spent[side].append((time.process_time() - t0) / calls * 1e6)
        finally:
            gc.enable()
    pairs = list(zip(spent["plain"], spent["floor"], spent["hitl"], spent["check"], strict=True))
    overheads = [h - p for p, _, h, _ in pairs]
    floors = [f - p for p, f, _, _ in pairs]
    # Paired per round: the adapter against its own framework's hook doing nothing (or the framework alone, for an
    # adapter that does not use the hook), less gate.check's own work in the same round.
    beyond = [h - (p if name in REPLACES_THE_NODE else f) - c for p, f, h, c in pairs]
    label = f"{name}, {FLOORS[name]} (floor)"
    _median_row(f"{name}: overhead per allowed call", overheads, f"<= {target:g} µs", target)
    row(f"{name}: the framework alone, per call (median)", f"{median(spent['plain']):.1f} µs")
    _median_row(f"{label}: overhead per allowed call", floors, "(same run)", None)
    less = "the framework alone" if name in REPLACES_THE_NODE else "the floor"
    _median_row(f"{name}: beyond gate.check alone and {less}", beyond, f"<= {BEYOND_CHECK_US:g} µs", BEYOND_CHECK_US)
    return overheads, floors


def _median_row(label: str, samples: list[float], target: str, limit: float | None) -> None:
    mid = median(samples)
    lo, hi = median_ci(samples)
    row(
        f"{label}, median [95% CI]",
        f"{mid:.1f} [{lo:.1f}, {hi:.1f}] µs",
        target,
        None if limit is None else mid <= limit,
    )


async def gate_alone(store: Store, rounds: int, calls: int, target: float) -> list[float]:
    """The gate's own decision for an allowed call, without any framework around it (the stable part), in CPU time
    as the adapters' overheads are."""
    gate = ToolGate(ApprovalService.from_config(POLICY, store=store, clock=SystemClock()))
    await checks(gate, 5)
    per_call = [await checks(gate, calls) / calls * 1e6 for _ in range(rounds)]
    lo, mid, hi = min(per_call), median(per_call), max(per_call)
    row(
        "gate.check of an allowed call (min/med/max)",
        f"{lo:.1f}/{mid:.1f}/{hi:.1f} µs",
        f"<= {target:g} µs",
        mid <= target,
    )
    return per_call


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--framework", action="append", choices=sorted(FRAMEWORKS), help="only these (repeatable)")
    parser.add_argument("--calls", type=int, default=200)
    opts = parser.parse_args()
    with every_store("gb") as stores:
        for label, open_store in stores.items():
            store = open_store()
            heading(f"gate overhead on {label} ({opts.rounds} interleaved rounds of {opts.calls} calls)")
            alone = await gate_alone(store, opts.rounds, opts.calls, TARGETS_US[label])
            bars: list[Bar] = [bar("gate.check alone", alone)]
            for name in opts.framework or FRAMEWORKS:
                overheads, floors = await measure(store, name, opts.rounds, opts.calls, TARGETS_US[label])
                bars.append(bar(name, overheads))
                bars.append(bar(f"{name}, {FLOORS[name]} (floor)", floors, floor=True))
            chart(
                f"Added per allowed tool call, {label} store (vs the framework alone, same run)",
                "µs per call (CPU)",
                bars,
                goal=TARGETS_US[label],
                goal_label=f"<= {TARGETS_US[label]:g} µs",
            )
            await store.close()


if __name__ == "__main__":
    with report("gate", "What an agent adapter adds to an allowed tool call"):
        asyncio.run(main())
