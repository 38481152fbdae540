"""What a step can tell the run: halt (and why), jump to another step, or carry on."""

from __future__ import annotations

from dataclasses import dataclass

from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import Halted

__all__ = ["HALTED_PREFIX", "Halt", "Redo", "goes_on", "halt_for", "paused_by_halt"]

HALTED_PREFIX = "halted: "
"""How a run paused by the stop switch reads (its reason): the lift resumes exactly these runs."""


@dataclass(frozen=True)
class Halt:
    """Stop the run here: paused on an approval, or ended (rejected, expired, cancelled, failed)."""

    status: RunStatus
    approval: Approval | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Redo:
    """Run ``step_id`` again, then go on from it (a gate's feedback re-runs the step it reviewed)."""

    step_id: str


def goes_on(a: Approval) -> bool:
    """A review that lets its step go on: approved, or closed since (a review is closed as executed when read)."""
    return a.status in (Status.APPROVED, Status.EXECUTING, Status.EXECUTED)


def halt_for(a: Approval) -> Halt | None:
    """Where a run stops on the approval ``a``: paused while it is pending, ended when it was refused; None when the
    step goes on."""
    match a.status:
        case Status.PENDING:
            return Halt(RunStatus.PAUSED, approval=a)
        case Status.REJECTED:
            return Halt(RunStatus.REJECTED, approval=a, reason=a.reason or "rejected")
        case Status.EXPIRED:
            return Halt(RunStatus.EXPIRED, approval=a, reason="the approval expired without a decision")
        case Status.CANCELLED:
            return Halt(RunStatus.CANCELLED, approval=a, reason=a.reason or "cancelled")
        case _:
            return None


def paused_by_halt(exc: Halted) -> Halt:
    """The run pauses where the stop switch refused a step (a tool, a gate, an agent's call), saying so; the lift
    resumes exactly these runs."""
    return Halt(RunStatus.PAUSED, reason=f"{HALTED_PREFIX}{exc.message}")
