"""LangGraph: approvals that pause a graph with ``interrupt()`` and resume it exactly once.

Three pieces, for async graphs (``ainvoke``/``astream``) with a checkpointer:

- :func:`gated_call` inside your own node: proposes the call, pauses the graph with ``interrupt()`` carrying the
  approval id while a person decides, then runs the effect once with the approved arguments. A node re-run on
  resume re-attaches to the same approval and, after the effect, returns its recorded output (no second approval,
  no second effect).
- :class:`HitlToolNode` for tool-calling agents: every tool call of the last AI message goes through hitl's policy;
  a tool the policy does not list needs approval (fail closed, unlike middleware that auto-approves unlisted tools).
- :class:`Resumer`: once every approval a thread waits for is decided, resumes it with ``Command(resume=...)`` from
  any process, one process at a time.

The decision is always read from hitl's store: the resume value carries nothing a caller could forge.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.types import Command, interrupt

from hitl.engine.agents.gate import GateRefused, Ticket, ToolCall, ToolGate
from hitl.engine.agents.runs import AgentRuns
from hitl.engine.errors import EngineError

__all__ = ["HitlToolNode", "Resumer", "gated_call"]

FRAMEWORK = "langgraph"
"""What the approvals this integration asks for record as their framework (the card's "asked by")."""
_KEY = "hitl_approvals"


def _thread() -> tuple[str, str]:
    configurable = get_config().get("configurable", {})
    thread = configurable.get("thread_id")
    if not thread:
        raise EngineError("run the graph with a checkpointer and a thread_id: hitl pauses and resumes threads")
    return str(thread), str(configurable.get("checkpoint_ns", ""))


async def _decided(gate: ToolGate, thread: str, tickets: list[Ticket]) -> list[Ticket]:
    """Pause the graph while any ticket is pending; on resume, each ticket as the store now has it."""
    waiting = [t.approval.id for t in tickets if t.pending and t.approval is not None]
    if waiting:
        # Durable before the graph stops: a Resumer's watcher in any process continues the thread once decided.
        await AgentRuns(gate, FRAMEWORK).watch(thread, waiting)
        interrupt({_KEY: waiting})  # the first pass stops here; on resume it returns and the store decides
    return [await gate.refresh(t) if t.pending else t for t in tickets]


async def gated_call(
    gate: ToolGate,
    tool: str,
    args: dict[str, Any],
    fn: Callable[..., Any],
    *,
    schema: dict[str, Any] | None = None,
    call_id: str | None = None,
    evidence: str = "",
) -> Any:
    """Inside an async node: the output of ``fn(**approved_args)``, run once; :class:`GateRefused` when the call was
    denied, rejected or expired (its message is the reviewer's reason)."""
    thread, namespace = _thread()
    call = ToolCall(
        tool,
        args,
        session=thread,
        framework=FRAMEWORK,
        call_id=call_id or f"{namespace}:{tool}",
        schema=schema,
        evidence=evidence,
    )
    (ticket,) = await _decided(gate, thread, [await gate.check(call)])
    return await gate.execute(ticket, fn)


def _schema_of(tool: BaseTool) -> dict[str, Any] | None:
    try:
        schema = tool.tool_call_schema
        return schema.model_json_schema() if hasattr(schema, "model_json_schema") else dict(schema)  # type: ignore[arg-type]
    except Exception:  # a tool that cannot describe itself is still gated, just without a typed Modify form
        return None


class HitlToolNode:
    """A tool node whose every call goes through hitl: ``graph.add_node("tools", HitlToolNode(tools, gate))``."""

    def __init__(self, tools: Sequence[BaseTool], gate: ToolGate, *, messages_key: str = "messages") -> None:
        self.tools = {t.name: t for t in tools}
        self.gate = gate
        self.messages_key = messages_key
        self._schemas: dict[str, tuple[BaseTool, dict[str, Any] | None]] = {}

    async def __call__(self, state: Any) -> dict[str, Any]:  # any state with a messages list (graph-typed)
        thread, _ = _thread()
        last = state[self.messages_key][-1]
        calls = list(last.tool_calls) if isinstance(last, AIMessage) else []
        tickets = []
        for tc in calls:
            tool = self.tools.get(tc["name"])
            call = ToolCall(
                tc["name"],
                dict(tc["args"]),
                session=thread,
                framework=FRAMEWORK,
                call_id=str(tc["id"]),
                schema=self._schema(tool) if tool is not None else None,
            )
            tickets.append(await self.gate.check(call))
        decided = await _decided(self.gate, thread, tickets)
        # Concurrently, as LangGraph's own ToolNode runs a message's calls (each still runs once, by its ticket).
        out = await asyncio.gather(*(self._run(tc, t) for tc, t in zip(calls, decided, strict=True)))
        return {self.messages_key: list(out)}

    def _schema(self, tool: BaseTool) -> dict[str, Any] | None:
        """The tool's JSON Schema, worked out once per tool: LangChain builds ``tool_call_schema`` anew on every
        read (~25 µs, as much as the gate's whole decision), and the same dict each call lets the gate reuse its
        compiled form."""
        known = self._schemas.get(tool.name)
        if known is None or known[0] is not tool:  # a tool replaced in ``tools`` is described again
            known = self._schemas[tool.name] = (tool, _schema_of(tool))
        return known[1]

    async def _run(self, tc: Any, ticket: Ticket) -> ToolMessage:
        tool = self.tools.get(tc["name"])
        try:
            if not ticket.runs:
                raise GateRefused(ticket.message)
            if tool is None:
                raise GateRefused(f"{tc['name']} is not a tool of this node")

            async def run(**args: Any) -> Any:
                return await tool.ainvoke(args)

            output = await self.gate.execute(ticket, run)
        except EngineError as exc:
            return ToolMessage(f"DENIED: {exc.message}", tool_call_id=tc["id"], name=tc["name"], status="error")
        text = output if isinstance(output, str) else json.dumps(output, default=str)
        return ToolMessage(text, tool_call_id=tc["id"], name=tc["name"])


class Resumer:
    """Resumes threads paused by hitl once every approval they wait for is decided, one process at a time.

    Call :meth:`resume` yourself, or let an :class:`~hitl.engine.agents.runs.AgentWatcher` do it as decisions arrive::

        watcher = AgentWatcher(gate, [Resumer(graph, gate)])
        watcher.start()          # in the agent process: paused threads continue once decided, from any surface

    Args:
        graph: the compiled graph (with its checkpointer).
        gate: the tool gate.
        on_result: called with the thread id and the graph's output after each background resume.
    """

    framework = FRAMEWORK

    def __init__(
        self, graph: Any, gate: ToolGate, *, on_result: Callable[[str, Any], Awaitable[None]] | None = None
    ) -> None:
        self.graph = graph
        self.gate = gate
        self.on_result = on_result
        self.runs = AgentRuns(gate, FRAMEWORK)

    async def waiting_for(self, thread: str) -> list[str]:
        """The approval ids the thread's pending interrupts carry (empty when it is not paused by hitl)."""
        snapshot = await self.graph.aget_state({"configurable": {"thread_id": thread}})
        ids: list[str] = []
        for it in getattr(snapshot, "interrupts", ()) or ():
            value = getattr(it, "value", None)
            if isinstance(value, dict) and isinstance(value.get(_KEY), list):
                ids.extend(str(i) for i in value[_KEY])
        return ids

    async def resume(self, thread: str, **kw: Any) -> Any | None:
        """``Command(resume=...)`` the thread when all its approvals are decided; None while any is pending, when
        it is not paused by hitl, or when another process is resuming it."""
        ids = await self.waiting_for(thread)
        if not ids:
            return None
        for approval_id in ids:
            approval = await self.gate.effects.follow(await self.gate.service.store.approvals.get(approval_id))
            if approval.is_open:
                return None
        if not await self.runs.take(thread):
            return None
        try:
            if await self.waiting_for(thread) != ids:  # resumed meanwhile by a process whose lease ended
                return None
            return await self.graph.ainvoke(
                Command(resume={"decided": ids}), {"configurable": {"thread_id": thread}}, **kw
            )
        finally:
            await self.runs.release(thread)

    async def continue_run(self, session: str) -> bool:
        """For the watcher: resume the thread if it is ready. True when finished with it (resumed, or it no
        longer waits on hitl); False while an approval is pending or another process is resuming it."""
        ids = await self.waiting_for(session)
        if not ids:
            return True
        result = await self.resume(session)
        if result is None:  # pending, held by another process, or resumed (and perhaps paused anew) meanwhile
            return await self.waiting_for(session) != ids
        if self.on_result is not None:
            await self.on_result(session, result)
        return True
