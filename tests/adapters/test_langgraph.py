"""LangGraph (the real library, a scripted model node, a SQLite checkpointer): HitlToolNode and the Resumer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import aiosqlite
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from hitl.adapters.langgraph import HitlToolNode, Resumer, gated_call
from hitl.engine.agents.gate import ToolGate
from hitl.engine.clocks import SystemClock
from hitl.engine.config.hitl_yaml import parse_config
from hitl.engine.domain.models import DecisionKind, Status
from hitl.engine.domain.requests import DecideRequest
from hitl.engine.service import ApprovalService
from hitl.engine.storage.sqlite import SqliteStore
from hitl.engine.testing.conformance.adapters import AdapterConformance
from hitl.engine.testing.conformance.agent_world import (
    ADAPTER_CONFIG,
    AgentHarness,
    AgentRun,
    AgentWorld,
    Ledger,
    ScriptedCall,
    Transcript,
)
from tests.processes import stop_process

ROOT = Path(__file__).resolve().parents[2]


def tools(world: AgentWorld) -> list[Any]:
    return [tool(fn) for fn in world.ledger.tools()]


def build(world: AgentWorld, calls: list[ScriptedCall], saver: AsyncSqliteSaver, gate: Any) -> Any:
    def model(state: MessagesState) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done")]}
        tool_calls = [{"name": c.tool, "args": dict(c.args), "id": c.call_id, "type": "tool_call"} for c in calls]
        return {"messages": [AIMessage("", tool_calls=tool_calls)]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", HitlToolNode(tools(world), gate))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", END])
    g.add_edge("tools", "model")
    return g.compile(checkpointer=saver)


async def _transcript(graph: Any, thread: str) -> Transcript:
    snapshot = await graph.aget_state({"configurable": {"thread_id": thread}})
    return Transcript(
        {m.tool_call_id: str(m.content) for m in snapshot.values["messages"] if isinstance(m, ToolMessage)}
    )


class LangGraphHarness:
    framework = "langgraph"
    modifies = True

    def __init__(self, world: AgentWorld) -> None:
        self.world = world
        self.connections: list[aiosqlite.Connection] = []
        world.cleanups.append(self.close)

    async def process(self, calls: list[ScriptedCall]) -> tuple[Any, Resumer, Any]:
        """What one agent process holds: its own checkpointer connection, store connection, graph and resumer."""
        conn = await aiosqlite.connect(self.world.ledger.path.parent / "checkpoints.db")
        self.connections.append(conn)
        store = self.world.store()
        gate = self.world.gate(store)
        graph = build(self.world, calls, AsyncSqliteSaver(conn), gate)
        return graph, Resumer(graph, gate), store

    async def start(self, calls: list[ScriptedCall], *, session: str) -> AgentRun:
        graph, resumer, store = await self.process(calls)
        config = {"configurable": {"thread_id": session}}
        result = await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
        return AgentRun(session, calls, store, {"graph": graph, "resumer": resumer, "result": result})

    async def finish(self, run: AgentRun) -> Transcript:
        graph, resumer = run.state["graph"], run.state["resumer"]
        if run.state["result"] is None or "__interrupt__" in run.state["result"]:
            result = await resumer.resume(run.session)
            assert result is not None, "every approval was decided, so the thread must resume"
            assert "__interrupt__" not in result
            assert await resumer.resume(run.session) is None  # resumed once: nothing waits any more
        seen = await _transcript(graph, run.session)
        await self.close()
        return seen

    async def finish_shared(self, run: AgentRun) -> Transcript | None:
        graph, resumer = run.state["graph"], run.state["resumer"]
        if (run.state["result"] is None or "__interrupt__" in run.state["result"]) and (
            await resumer.resume(run.session) is None
        ):
            return None  # another process continued the thread
        return await _transcript(graph, run.session)

    async def close(self) -> None:
        for conn in self.connections:
            await conn.close()
        self.connections.clear()

    async def crash(self, run: AgentRun) -> None:
        run.state.clear()
        await self.close()

    async def restart(self, run: AgentRun) -> AgentRun:
        graph, resumer, store = await self.process(run.calls)
        return AgentRun(run.session, run.calls, store, {"graph": graph, "resumer": resumer, "result": None})


class TestLangGraph(AdapterConformance):
    def harness(self, world: AgentWorld) -> AgentHarness:
        return LangGraphHarness(world)


class Refund(TypedDict):
    order_id: str
    amount: float
    result: str


async def test_gated_call_in_a_node_asks_once_and_runs_once_across_reruns(world: AgentWorld) -> None:
    """The node re-runs on resume, and once more after a crash past the effect: one approval, one effect."""
    crash_after_effect = [True]
    store = world.store()
    gate = world.gate(store)

    async def pay(state: Refund) -> dict[str, Any]:
        out = await gated_call(
            gate, "refund", {"order_id": state["order_id"], "amount": state["amount"]}, world.ledger.refund
        )
        if crash_after_effect.pop() if crash_after_effect else False:
            raise RuntimeError("the process died right after the effect")
        return {"result": str(out)}

    g = StateGraph(Refund)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    async with aiosqlite.connect(world.ledger.path.parent / "node.db") as conn:
        graph = g.compile(checkpointer=AsyncSqliteSaver(conn))
        config: Any = {"configurable": {"thread_id": "node-1"}}
        first = await graph.ainvoke({"order_id": "N1", "amount": 75, "result": ""}, config)
        assert "__interrupt__" in first
        (a,) = (await store.approvals.list_pending()).items
        await world.service(store).decide(
            DecideRequest(a.id, "U_S1", DecisionKind.MODIFY, args={"order_id": "N1", "amount": 70})
        )
        resumer = Resumer(graph, gate)
        try:
            await resumer.resume("node-1")
        except RuntimeError:
            pass  # the node died after its effect; the checkpoint still holds the interrupt's answer
        done = await graph.ainvoke(None, config)  # the node runs again: the effect is not repeated
        assert done["result"] == "refunded 70 on order N1"
        assert world.ledger.rows() == [("refund", "N1", 70.0)]
        assert (await store.approvals.list_pending()).items == []
        assert await resumer.resume("node-1") is None


async def test_a_thread_paused_in_one_process_resumes_once_in_another(tmp_path: Path) -> None:
    """Real processes on one SQLite store and one SQLite checkpointer: start, decide, resume, resume again."""

    def agent(mode: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "tests.adapters.langgraph_process", mode, str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert agent("start") == "paused"
    store = SqliteStore(tmp_path / "hitl.db")
    (a,) = (await store.approvals.list_pending()).items
    assert a.metadata["framework"] == "langgraph" and a.session_id == "proc-thread"
    svc = ApprovalService.from_config(parse_config(ADAPTER_CONFIG), store=store, clock=SystemClock())
    await svc.decide(DecideRequest(a.id, "U_S2", DecisionKind.APPROVE))
    assert agent("resume") == "resumed: done"
    assert agent("resume") == "nothing to resume"
    assert Ledger(tmp_path / "effects.db").rows() == [("refund", "P1", 45.0)]
    await store.close()


async def test_watchers_in_other_processes_resume_the_thread_once_after_a_cli_decision(tmp_path: Path) -> None:
    """The engine continues a paused thread on a decision made elsewhere: the thread pauses in one process, two
    agent processes run watchers, a reviewer approves with the `hitl` CLI, and exactly one watcher resumes it."""

    def agent(mode: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.adapters.langgraph_process", mode, str(tmp_path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    start = agent("start")
    assert start.communicate(timeout=120)[0].strip() == "paused"
    watchers = [agent("watch"), agent("watch")]
    try:
        for w in watchers:
            assert w.stdout is not None and w.stdout.readline().strip() == "watching"
        store = SqliteStore(tmp_path / "hitl.db")
        (a,) = (await store.approvals.list_pending()).items
        config = tmp_path / "hitl.yaml"
        config.write_text(ADAPTER_CONFIG)
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "hitl",
                "resume",
                a.id,
                "--approve",
                "--as",
                "U_S2",
                "--store",
                f"sqlite:///{tmp_path / 'hitl.db'}",
                "--config",
                str(config),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr
        outputs = [w.communicate(timeout=120) for w in watchers]
        assert all(w.returncode == 0 for w in watchers), [err for _, err in outputs]
        resumed = [line for out, _ in outputs for line in out.splitlines() if line.startswith("resumed")]
        assert resumed == ["resumed proc-thread: done"]
        assert Ledger(tmp_path / "effects.db").rows() == [("refund", "P1", 45.0)]
        assert (await store.approvals.get(a.id)).status is Status.EXECUTED
        await store.close()
    finally:  # never leaked, whatever failed
        for w in watchers:
            stop_process(w)


async def test_the_tool_node_describes_each_tool_once_however_many_calls(tmp_path: Path) -> None:
    """LangChain builds a tool's ``tool_call_schema`` anew on every read (~25 µs, as much as the gate's whole
    decision): the node reads it once per tool, and every approval still carries the tool's schema."""
    reads: list[str] = []

    class Described(StructuredTool):
        @property
        def tool_call_schema(self) -> Any:
            reads.append(self.name)
            return super().tool_call_schema

    async def look_up_order(order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id}: shipped"

    async def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount} on {order_id}"

    node_tools = [Described.from_function(coroutine=fn) for fn in (look_up_order, refund)]
    config = parse_config("policy: {allowed_tools: [look_up_order], tools: {refund: {tier: approve}}}")
    store = SqliteStore(tmp_path / "hitl.db")
    gate = ToolGate(ApprovalService.from_config(config, store=store, clock=SystemClock()))
    node = HitlToolNode(node_tools, gate)
    calls = [{"name": "look_up_order", "args": {"order_id": str(i)}, "id": f"c{i}"} for i in range(3)]
    calls.append({"name": "refund", "args": {"order_id": "7", "amount": 5.0}, "id": "r1"})

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("", tool_calls=calls)]}

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", node)
    g.add_edge(START, "model")
    g.add_edge("model", "tools")
    g.add_edge("tools", END)
    graph = g.compile(checkpointer=InMemorySaver())
    for thread in ("t1", "t2"):
        await graph.ainvoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": thread}})
    try:
        assert sorted(reads) == ["look_up_order", "refund"]
        pending = (await store.approvals.list_pending()).items
        assert len(pending) == 2 and {a.tool for a in pending} == {"refund"}
        described: Any = node_tools[1].tool_call_schema
        expected = described.model_json_schema()
        assert all(a.args_schema == expected for a in pending)
    finally:
        await store.close()
