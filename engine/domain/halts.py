"""The stop switch: halt orders that stop every gate from letting new actions through (EU AI Act Art. 14: the
ability to intervene in or stop the system). Pure: no I/O.

An order covers one tool, or every tool (scope :data:`EVERY_TOOL`). While one covers a tool, nothing new of that tool
is proposed, approved or executed; rejecting still works, and runs pause at their next gated step until it is lifted.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.models import Approval, ApprovalKind

__all__ = ["EVERY_TOOL", "HaltOrder", "acted_on", "covering", "halt_message"]

EVERY_TOOL = "*"
"""The scope of an order that halts every tool."""


class HaltOrder(BaseModel):
    """An order to halt ``scope`` (a tool's name, or :data:`EVERY_TOOL`), given by ``by`` at ``at``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str = Field(min_length=1, max_length=200)
    by: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=1000)
    at: float


def acted_on(a: Approval) -> str:
    """The tool an approval lets run: its own, or for an effect in doubt ("Run again") the tool it asks about."""
    asked = a.args.get("tool") if a.kind is ApprovalKind.DOUBT else None
    return asked if isinstance(asked, str) else a.tool


def covering(orders: Iterable[HaltOrder], tool: str) -> HaltOrder | None:
    """The order that halts ``tool``: its own, else one for every tool; None when it may go on."""
    found = {o.scope: o for o in orders}
    return found.get(tool) or found.get(EVERY_TOOL)


def halt_message(order: HaltOrder, tool: str) -> str:
    """What a refused caller and a reviewer are told."""
    every = order.scope == EVERY_TOOL
    why = f": {order.reason}" if order.reason else ""
    lift = "hitl unhalt" if every else f"hitl unhalt --tool {order.scope}"
    return f"halted by {order.by}{why} ({'every tool' if every else tool} is stopped until `{lift}`)"
