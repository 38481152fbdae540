"""Pydantic AI: deferred tool approvals backed by hitl.

Wrap the agent's tools in :class:`HitlToolset` and let :class:`HitlRunner` run it::

    agent = Agent(model, output_type=[str, DeferredToolRequests], toolsets=[HitlToolset(FunctionToolset([refund]))])
    runner = HitlRunner(agent, gate)
    result = await runner.run("refund order 42", session="chat-7")   # stops with DeferredToolRequests
    ...                                                             # a reviewer decides in Slack
    result = await runner.resume("chat-7")                          # from any process

Each call the policy sends to a person raises ``ApprovalRequired`` carrying its approval id; the run stops and its
message history is stored in hitl's run store. :meth:`HitlRunner.resume` maps each decision to the SDK's own
answer (``ToolApproved(override_args=...)`` with a reviewer's edit, ``ToolDenied(message=<reason>)``) and continues
the run. The toolset re-checks every approved call against the store before it runs, so a hand-made
``ToolApproved`` cannot bypass hitl, and runs it once under the approval's idempotency key.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from hitl.engine.agents.gate import Ticket, ToolCall, ToolGate
from hitl.engine.agents.runs import AgentRuns, Interrupted
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError

__all__ = ["HitlRunner", "HitlToolset"]

log = logging.getLogger(__name__)

FRAMEWORK = "pydantic-ai"
"""What the approvals this integration asks for record as their framework (the card's "asked by")."""
_META = "hitl_approval"
_CURRENT: contextvars.ContextVar[tuple[ToolGate, str]] = contextvars.ContextVar("hitl_pydantic_ai_run")


@dataclass
class HitlToolset(WrapperToolset[Any]):
    """Every call of the wrapped tools goes through hitl's policy (run under :class:`HitlRunner`)."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Call the tool through the gate: run it, deny it, or stop the run until a person decides."""
        try:
            gate, session = _CURRENT.get()
        except LookupError:
            return f"DENIED: {name} did not run: run this agent through hitl's HitlRunner"
        call = ToolCall(
            name,
            tool_args,
            session=session,
            framework=FRAMEWORK,
            call_id=ctx.tool_call_id,
            schema=tool.tool_def.parameters_json_schema,
            agent=getattr(ctx, "agent", None) and getattr(ctx.agent, "name", None),
        )
        try:
            ticket = await self._ticket(gate, call, ctx)
        except EngineError as exc:
            return f"DENIED: {name} did not run: {exc.message}"
        if ticket.pending:
            if ctx.tool_call_approved:
                return f"DENIED: {name} did not run: it is still waiting for a reviewer in hitl"
            assert ticket.approval is not None
            raise ApprovalRequired(metadata={_META: ticket.approval.id})
        if not ticket.runs:
            return f"DENIED: {ticket.message}"

        async def run(**args: Any) -> Any:
            return await super(HitlToolset, self).call_tool(name, args, ctx, tool)

        try:
            return await gate.execute(ticket, run, args=tool_args)
        except EngineError as exc:
            return f"DENIED: {name} did not run: {exc.message}"

    async def _ticket(self, gate: ToolGate, call: ToolCall, ctx: RunContext[Any]) -> Ticket:
        """On a resumed call, the approval the runner named (verified to be this call's); else propose."""
        meta = ctx.tool_call_metadata or {}
        approval_id = meta.get(_META) if ctx.tool_call_approved else None
        if isinstance(approval_id, str):
            approval = await gate.service.store.approvals.get(approval_id)
            origin = approval.metadata
            if (
                approval.tool == call.tool
                and approval.session_id == call.session
                and origin.get("framework") == FRAMEWORK
                and origin.get("call_id") == call.call_id
            ):
                return await gate.ticket_for(call, approval)
            raise EngineError(f"approval {approval_id} is not this call's")
        return await gate.check(call)


class HitlRunner:
    """Runs a Pydantic AI agent whose tools are wrapped in :class:`HitlToolset`; resumes it from any process.

    The agent's ``output_type`` must include ``DeferredToolRequests``.
    """

    def __init__(self, agent: Agent[Any, Any], gate: ToolGate) -> None:
        self.agent = agent
        self.gate = gate
        self.runs = AgentRuns(gate, FRAMEWORK)

    async def run(self, prompt: str | None, *, session: str, **kw: Any) -> Any:
        """Run the agent; when it stops for approvals, store its history and return the SDK's result."""
        return await self._drive(session, prompt, **kw)

    async def _drive(self, session: str, prompt: str | None, **kw: Any) -> Any:
        """``agent.run`` with the toolset bound to this session; stores the history when it stops again."""
        token = _CURRENT.set((self.gate, session))
        try:
            result = await self.agent.run(prompt, **kw)
        finally:
            _CURRENT.reset(token)
        await self._stopped(session, result)
        return result

    async def resume(self, session: str, **kw: Any) -> Any | None:
        """Continue ``session``'s stopped run once every approval is decided; None while any is pending, or when
        nothing waits, or another process is continuing it."""

        async def go(run: Interrupted, decided: dict[str, Approval]) -> Any:
            answers: dict[str, ToolApproved | ToolDenied] = {}
            for call_id, approval in decided.items():
                ticket = await self.gate.ticket_of(approval)
                if ticket.runs:
                    # Always the approved arguments: a reviewer's edit, or the edit of an approval it superseded.
                    answers[call_id] = ToolApproved(override_args=dict(ticket.args))
                else:
                    answers[call_id] = ToolDenied(message=f"DENIED: {ticket.message}")
            results = DeferredToolResults(
                approvals=dict(answers), metadata={cid: {_META: run.approvals[cid]} for cid in answers}
            )
            history = ModelMessagesTypeAdapter.validate_json(str(run.state["messages"]))
            return await self._drive(session, None, message_history=history, deferred_tool_results=results, **kw)

        return await self.runs.continued(session, go)

    async def _stopped(self, session: str, result: Any) -> None:
        requests = result.output
        if not isinstance(requests, DeferredToolRequests) or not requests.approvals:
            return
        approvals = {
            call.tool_call_id: str(requests.metadata.get(call.tool_call_id, {}).get(_META, ""))
            for call in requests.approvals
        }
        missing = [cid for cid, aid in approvals.items() if not aid]
        if missing:  # an approval asked for outside hitl (another toolset): hitl cannot decide it
            raise EngineError(f"calls {missing} wait for approvals hitl did not create; wrap every tool in HitlToolset")
        await self.runs.save(session, approvals=approvals, state={"messages": result.all_messages_json().decode()})
