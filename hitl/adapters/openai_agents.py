"""OpenAI Agents SDK: ``needs_approval`` interruptions backed by hitl.

Gate the agent's function tools and let :class:`HitlRunner` run it::

    agent = Agent(name="support", tools=gated([refund, look_up_order]))
    runner = HitlRunner(agent, gate)
    result = await runner.run("refund order 42", session="chat-7")   # stops with result.interruptions
    ...                                                             # a reviewer decides in Slack
    result = await runner.resume("chat-7")                          # from any process

Each gated tool's ``needs_approval`` asks hitl's policy; a call that needs a person becomes an interruption and an
approval, and the serialized ``RunState`` is stored in hitl's run store. :meth:`HitlRunner.resume` answers each
interruption from the decisions (``approve``, or ``reject`` with the reviewer's reason as the message the model
sees) and continues the run. The tool's own invocation is wrapped too: it re-reads the decision from the store (an
approval made on the ``RunState`` by hand cannot bypass hitl), runs the approved arguments (a reviewer's edit
included), and runs once under the approval's idempotency key.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, Runner, RunState, Tool
from agents.tool_context import ToolContext

from hitl.engine.agents.gate import Ticket, ToolCall, ToolGate
from hitl.engine.agents.runs import AgentRuns, Interrupted
from hitl.engine.domain.hashing import normalize
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError

__all__ = ["HitlRunner", "gated"]

FRAMEWORK = "openai-agents"
"""What the approvals this integration asks for record as their framework (the card's "asked by")."""


@dataclasses.dataclass
class _Run:
    gate: ToolGate
    session: str
    asked: dict[str, str] = dataclasses.field(default_factory=dict)
    """call id -> approval id, for the calls this run stopped on."""
    allowed: dict[str, Ticket] = dataclasses.field(default_factory=dict)
    """call id -> the policy's "run it" from ``needs_approval``, taken by the invocation that follows it (so an
    allowed call is judged once; the invocation's arguments are still checked against the ticket's)."""


_CURRENT: contextvars.ContextVar[_Run] = contextvars.ContextVar("hitl_openai_agents_run")


def gated(tools: Iterable[FunctionTool]) -> list[Tool]:
    """The same function tools, every call decided by hitl (run the agent through :class:`HitlRunner`)."""
    return [_gate_tool(t) for t in tools]


def _gate_tool(tool: FunctionTool) -> FunctionTool:
    invoke = tool.on_invoke_tool
    schema = tool.params_json_schema

    def call_of(run: _Run, args: dict[str, Any], call_id: str) -> ToolCall:
        return ToolCall(tool.name, args, session=run.session, framework=FRAMEWORK, call_id=call_id, schema=schema)

    async def needs_approval(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        run = _CURRENT.get(None)
        if run is None:
            return True  # outside HitlRunner nothing can decide it: the invocation below refuses it anyway
        try:
            ticket = await run.gate.check(call_of(run, params, call_id))
        except EngineError:
            return False  # the invocation re-checks and refuses; the model is told why
        if ticket.pending and ticket.approval is not None:
            run.asked[call_id] = ticket.approval.id
            return True
        if ticket.runs and ticket.approval is None:
            run.allowed[call_id] = ticket
        return False

    async def on_invoke(ctx: ToolContext[Any], raw: str) -> Any:
        run = _CURRENT.get(None)
        if run is None:
            return f"DENIED: {tool.name} did not run: run this agent through hitl's HitlRunner"
        try:
            args = json.loads(raw or "{}")
            cached = run.allowed.pop(ctx.tool_call_id, None)
            ticket = cached or await run.gate.check(call_of(run, args, ctx.tool_call_id))
            if ticket.pending:
                return f"DENIED: {tool.name} did not run: it is still waiting for a reviewer in hitl"
            if not ticket.runs:
                return f"DENIED: {ticket.message}"

            if (
                ticket.approval is None
                and not run.gate.receipted_when_allowed(ticket)
                and dict(normalize(args)) == ticket.args
            ):
                # Allowed without a person, and these are the arguments the policy judged: the SDK's own call,
                # on its own text (nothing to record, nothing to re-encode). A tool receipted `always` goes
                # through gate.execute below, which issues its receipt first.
                return await invoke(ctx, raw)

            async def execute(**approved: Any) -> Any:
                return await invoke(ctx, json.dumps(approved))

            return await run.gate.execute(ticket, execute, args=args if cached else None)
        except (EngineError, ValueError) as exc:
            message = exc.message if isinstance(exc, EngineError) else "its arguments are not JSON"
            return f"DENIED: {tool.name} did not run: {message}"

    # The SDK resolves the wrapper's type hints on every invocation (to choose which context to pass): resolved
    # once here, since this module's postponed (string) annotations would be evaluated again on every call.
    on_invoke.__annotations__ = {"ctx": ToolContext[Any], "raw": str, "return": Any}
    return dataclasses.replace(tool, on_invoke_tool=on_invoke, needs_approval=needs_approval)


class HitlRunner:
    """Runs an agent whose tools are :func:`gated`; stores its state when it stops and resumes it from any process."""

    def __init__(self, agent: Agent[Any], gate: ToolGate) -> None:
        self.agent = agent
        self.gate = gate
        self.runs = AgentRuns(gate, FRAMEWORK)

    async def run(self, prompt: str, *, session: str, **kw: Any) -> Any:
        """Run the agent on ``prompt`` in ``session``; calls that need a person interrupt the run until decided."""
        return await self._drive(_Run(self.gate, session), prompt, **kw)

    async def _drive(self, run: _Run, what: Any, **kw: Any) -> Any:
        """``Runner.run`` with the gated tools bound to this run; stores the state when it stops again."""
        token = _CURRENT.set(run)
        try:
            result = await Runner.run(self.agent, what, **kw)
        finally:
            _CURRENT.reset(token)
        await self._stopped(run, result)
        return result

    async def resume(self, session: str, **kw: Any) -> Any | None:
        """Continue ``session``'s stopped run once every approval is decided; None while any is pending, or when
        nothing waits, or another process is continuing it."""

        async def go(stored: Interrupted, decided: dict[str, Approval]) -> Any:
            state = await RunState.from_string(self.agent, str(stored.state["run_state"]))
            for item in state.get_interruptions():
                call_id = str(getattr(item.raw_item, "call_id", ""))
                approval = decided.get(call_id)
                if approval is None:
                    continue  # not hitl's: left for its own owner (the SDK keeps it pending)
                ticket = await self.gate.ticket_of(approval)
                if ticket.runs:
                    state.approve(item)
                else:
                    state.reject(item, rejection_message=f"DENIED: {ticket.message}")
            return await self._drive(_Run(self.gate, session), state, **kw)

        return await self.runs.continued(session, go)

    async def _stopped(self, run: _Run, result: Any) -> None:
        interruptions = list(getattr(result, "interruptions", None) or ())
        if not interruptions:
            return
        approvals: dict[str, str] = {}
        for item in interruptions:
            call_id = str(getattr(item.raw_item, "call_id", ""))
            if call_id in run.asked:
                approvals[call_id] = run.asked[call_id]
        await self.runs.save(run.session, approvals=approvals, state={"run_state": result.to_state().to_string()})
