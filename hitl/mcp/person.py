"""The tools ``hitl mcp --person-tools`` serves itself: ``request_approval`` and ``ask_person``.

``request_approval``: a tool ``hitl mcp --person-tools`` serves itself, for an agent that acts on its own but must
have a person's approval first (the MCP form of ``Approvals.ask``).

Its arguments are an action of a tool ``hitl.yaml`` declares with an argument schema (``tool`` and ``args``, checked
against that schema as any proposal is); nothing else. Who asks is the MCP principal (the bearer token's identity over
``--http``, the configured requester over stdio), never an argument. It waits up to ``mcp.wait`` as a gated call
does, then answers with the decision: for an approval, the approved arguments (a reviewer's edit included) and,
with ``receipts:`` configured, the signed receipt, the approval handed to this caller once (recorded as executed,
for the caller runs the action itself).

``ask_person`` (with ``mcp.ask_person`` in ``hitl.yaml``): a question, its only argument, asked as an approval of the
tool ``ask_person`` (the question an argument every surface shows as untrusted text: escaped, capped, look-alikes
marked); a reviewer answers it (Slack's Answer form, the API's ``answer``), which records the answer through the
decide path as an edit that adds ``answer``, and the caller gets the answer, handed over once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from hitl.engine.agents.gate import GateRefused, Ticket, ToolGate
from hitl.engine.domain.questions import ASK_PERSON, QUESTION_CAP

__all__ = [
    "ASK_PERSON",
    "REQUEST_APPROVAL",
    "answer_of",
    "ask_person_tool",
    "decision_of",
    "hand_over",
    "refused",
    "request_approval_tool",
]

REQUEST_APPROVAL = "request_approval"
"""The tool's name."""


def request_approval_tool(declared: Mapping[str, Any]) -> types.Tool:
    """The tool as listed: ``tool`` one of the ``declared`` tools (name -> argument schema), ``args`` its action."""
    schema = {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": sorted(declared), "description": "The action's tool (hitl.yaml)."},
            "args": {"type": "object", "description": "The action's arguments, as the tool's schema in hitl.yaml."},
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    }
    return types.Tool(
        name=REQUEST_APPROVAL,
        description=(
            "Ask a person to approve an action before you take it; returns the decision, the arguments to use (a "
            "reviewer may have changed them) and, where configured, a signed receipt. Take the action only when "
            "the decision is approved or allowed."
        ),
        input_schema=schema,
    )


def ask_person_tool(declared: Mapping[str, Any]) -> types.Tool:
    """``ask_person`` as listed: one argument, the question (``declared``: its schema in the policy)."""
    answer = declared.get("properties", {}).get("answer", {})
    most = answer.get("maxLength") if isinstance(answer, dict) else None
    schema = {
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1, "maxLength": QUESTION_CAP}},
        "required": ["question"],
        "additionalProperties": False,
    }
    return types.Tool(
        name=ASK_PERSON,
        description=(
            f"Ask a person a question and wait for their answer (text of at most {most} characters); a person may "
            "decline to answer. Returns the answer, or the decision and reason when there is none."
        ),
        input_schema=schema,
    )


def answer_of(ticket: Ticket) -> types.CallToolResult:
    """``ask_person``'s answer: ``decision`` ``answered`` and the ``answer``; else the decision (rejected,
    expired, cancelled) and its reason. An approval without an answer (approved as a plain approval) answers
    nothing: a tool error, for the caller must not take a go for an answer."""
    approval = ticket.approval
    out: dict[str, Any] = {"approval_id": approval.id} if approval is not None else {}
    answer = ticket.args.get("answer") if ticket.runs else None
    if ticket.runs and not isinstance(answer, str):
        text = f"{ASK_PERSON} was approved without an answer; ask again (no_answer)"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
    if ticket.runs:
        out.update(decision="answered", answer=answer)
    else:
        out.update(decision=str(approval.status) if approval is not None else "denied", reason=ticket.message)
    text = json.dumps(out, ensure_ascii=False, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=out)


async def hand_over(gate: ToolGate, ticket: Ticket) -> Ticket:
    """Hand an approved action to this caller: its one execution claimed (and its receipt issued), then recorded as
    done here, for the caller runs it. A policy-allowed one gets its receipt where its tool's receipts come always.

    Raises:
        GateRefused: handed to another caller already (``handed_elsewhere``), or halted.
    """
    if ticket.approval is None:
        return await gate.begin(ticket) if gate.receipted_when_allowed(ticket) else ticket
    ticket = await gate.begin(ticket)
    await gate.finish(ticket, ok=True, detail=f"handed to the MCP caller of {ticket.call.tool}")
    return ticket


def decision_of(ticket: Ticket) -> types.CallToolResult:
    """The answer: ``decision`` (approved, allowed, rejected, expired, cancelled, denied), and for a go ``args`` and
    ``receipt``; for a no, ``reason``. A no is an answer, not a failure of the tool."""
    approval = ticket.approval
    out: dict[str, Any] = {"tool": ticket.call.tool}
    if approval is not None:
        out["approval_id"] = approval.id
    if ticket.runs:
        out.update(decision="approved" if approval is not None else "allowed", args=ticket.args)
        if ticket.receipt is not None:
            out["receipt"] = ticket.receipt
    else:
        decision = str(approval.status) if approval is not None else "denied"
        out.update(decision=decision, reason=ticket.message)
    text = json.dumps(out, ensure_ascii=False, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=out)


def refused(exc: GateRefused) -> types.CallToolResult:
    """The hand-over refused (another caller was handed it, or a halt): a tool error with the code."""
    text = f"hitl did not hand over the approval ({exc.code}): {exc.message}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
