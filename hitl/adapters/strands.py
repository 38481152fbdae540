"""Strands Agents: a native intervention handler, and ``SlackAsk`` for ``HumanInTheLoop(ask=...)``.

``HitlIntervention`` reads the real tool call (``event.tool_use``: name, input, ``toolUseId``) and answers with
the SDK's own actions: ``Proceed``, ``Deny`` with the reviewer's reason, ``Transform`` to the reviewer's edited
arguments. It runs in two modes:

- ``inline``: the handler awaits the decision (the agent's event loop keeps running);
- ``interrupt`` (the SDK's stateless default): each call needing a human raises a Strands interrupt carrying its
  approval id, the agent stops with ``stop_reason == "interrupt"``, and :func:`resume` continues it from any
  process once every approval is decided (the agent restored by a Strands session manager).

For ``HumanInTheLoop(ask=...)`` users, :class:`hitl.SlackAsk` is the safe ``ask`` (no Strands import needed).

Either way the decision is read from hitl's store, never from the interrupt response, so a forged response cannot
approve anything; and the approval's one execution is claimed before the tool runs and recorded after it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from strands.hooks.events import AfterToolCallEvent, BeforeToolCallEvent
from strands.interrupt import InterruptException
from strands.interventions.actions import Deny, Proceed, Transform
from strands.interventions.handler import InterventionHandler, OnError

from hitl.engine.agents.gate import Ticket, ToolCall, ToolGate
from hitl.engine.agents.runs import AgentRuns, Interrupted
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError

__all__ = ["HitlIntervention", "pending_approvals", "resume"]

log = logging.getLogger(__name__)

INTERRUPT_NAME = "hitl"
_TICKETS = "hitl:tickets"


class HitlIntervention(InterventionHandler):
    """``Agent(interventions=[HitlIntervention(gate, session="run-42")])``.

    Args:
        gate: the tool gate (policy, store, reviewers).
        session: the agent session: trust and re-attachment are per session.
        mode: ``inline`` awaits each decision; ``interrupt`` stops the agent for :func:`resume`.
        agent: the agent's name, shown to reviewers.
        wait: seconds an inline wait lasts before the approval is closed (default: the gate's).
    """

    name = "hitl"

    def __init__(
        self,
        gate: ToolGate,
        *,
        session: str,
        mode: Literal["inline", "interrupt"] = "inline",
        agent: str | None = None,
        wait: float | None = None,
    ) -> None:
        self.gate = gate
        self.session = session
        self.mode = mode
        self.agent = agent
        self.wait = wait
        self._running: dict[str, Ticket] = {}
        self.runs = AgentRuns(gate, "strands")
        self._fresh = False

    @property
    def on_error(self) -> OnError:
        """Anything unexpected inside hitl denies the call (fail closed)."""
        return "deny"  # anything unexpected in hitl means the call does not run

    async def before_tool_call(self, event: BeforeToolCallEvent, **kwargs: Any) -> Deny | Proceed | Transform:
        """Ask the gate about the call: proceed, deny with the reason, or run the reviewer's arguments."""
        use = event.tool_use
        call = ToolCall(
            str(use["name"]),
            dict(use["input"]) if isinstance(use["input"], dict) else {"input": use["input"]},
            session=self.session,
            framework="strands",
            call_id=str(use["toolUseId"]),
            schema=_schema_of(event),
            agent=self.agent or getattr(event.agent, "name", None),
        )
        try:
            ticket = await self.gate.check(call)
            if ticket.pending and self.mode == "interrupt":
                assert ticket.approval is not None
                # The first pass stops the agent here; on resume the interrupt returns its response, which is
                # ignored: the decision is read from the store.
                try:
                    event.interrupt(
                        INTERRUPT_NAME,
                        reason={"approval_id": ticket.approval.id, "tool": call.tool, "session": self.session},
                    )
                except InterruptException as stop:
                    await self._remember(stop.interrupt.id, ticket.approval.id)
                    raise
                ticket = await self.gate.refresh(ticket)
            elif ticket.pending:
                ticket = await self.gate.wait(ticket, timeout=self.wait)
            if not ticket.runs:
                return Deny(reason=ticket.message or f"{call.tool} was not approved")
            ticket = await self.gate.begin(ticket)
        except InterruptException:
            raise  # the agent stops here (interrupt mode); not a failure
        except EngineError as exc:
            return Deny(reason=f"{call.tool} did not run: {exc.message}")
        except Exception as exc:  # hitl itself failed (a closed store, a bug): the call does not run
            log.exception("hitl could not decide %s; the call is denied", call.tool)
            return Deny(reason=f"{call.tool} did not run: hitl could not decide ({type(exc).__name__})")
        if ticket.approval is not None:  # an allowed call has no outcome to record
            self._running[call.call_id or ""] = ticket
        if ticket.args != call.args:
            approved = dict(ticket.args)

            def apply(e: Any) -> None:
                e.tool_use["input"] = approved

            return Transform(apply=apply, reason="a reviewer modified the arguments")
        return Proceed()

    async def _remember(self, interrupt_id: str, approval_id: str) -> None:
        """Store which approval each interrupt waits for, so any process can resume the run."""
        known = None if self._fresh else await self.runs.load(self.session)
        self._fresh = False
        approvals = {**(known.approvals if known else {}), interrupt_id: approval_id}
        await self.runs.save(self.session, approvals=approvals, state=None)

    async def after_tool_call(self, event: AfterToolCallEvent, **kwargs: Any) -> Proceed:
        """Record how an approved call went, so its approval is closed as executed or failed."""
        ticket = self._running.pop(str(event.tool_use["toolUseId"]), None)
        if ticket is not None and ticket.approval is not None:
            ok = event.exception is None and event.cancel_message is None and event.result.get("status") != "error"
            try:
                await self.gate.finish(ticket, ok=ok, detail=_result_text(event.result))
            except EngineError:
                log.exception("could not record the outcome of %s; its claim stays open (in doubt)", ticket.key)
        return Proceed()


def pending_approvals(result: Any) -> list[str]:
    """The approval ids an interrupted agent result waits for."""
    ids: list[str] = []
    for interrupt in getattr(result, "interrupts", None) or ():
        reason = getattr(interrupt, "reason", None)
        if getattr(interrupt, "name", "") == INTERRUPT_NAME and isinstance(reason, dict) and "approval_id" in reason:
            ids.append(str(reason["approval_id"]))
    return ids


async def resume(agent: Any, handler: HitlIntervention) -> Any | None:
    """Continue ``handler``'s session stopped by hitl interrupts, once every approval is decided.

    Returns the agent's result, or None while any approval is pending, when nothing waits, or when another process
    is continuing it. ``agent`` may be a new object in another process, restored by the same Strands session
    manager; the interrupts are answered by id, and the handler reads each decision from the store (the response
    text is informational only).
    """

    async def go(run: Interrupted, decided: dict[str, Approval]) -> Any:
        responses = [
            {"interruptResponse": {"interruptId": interrupt_id, "response": str(approval.status)}}
            for interrupt_id, approval in decided.items()
        ]
        handler._fresh = True
        try:
            return await agent.invoke_async(responses)
        finally:
            handler._fresh = False

    return await handler.runs.continued(handler.session, go)


def _schema_of(event: BeforeToolCallEvent) -> dict[str, Any] | None:
    tool = event.selected_tool
    if tool is None:
        return None
    try:
        spec = tool.tool_spec.get("inputSchema") or {}
    except Exception:  # a tool that cannot describe itself is still gated, just without a typed Modify form
        return None
    schema = spec.get("json") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def _result_text(result: Any) -> str:
    try:
        parts = (result or {}).get("content") or []
        return " ".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))[:500]
    except AttributeError:
        return ""
