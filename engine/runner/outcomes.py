"""What a step can tell the run: halt (and why), jump to another step, or carry on."""

from __future__ import annotations

from dataclasses import dataclass

from hitl.engine.domain.drift import DRIFTED
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.runs import RunStatus
from hitl.engine.errors import Halted

__all__ = ["HALTED_PREFIX", "Stop", "Redo", "goes_on", "stop_for", "paused_by_halt"]

HALTED_PREFIX = "halted: "
"""How a run paused by the stop switch reads (its reason): the lift resumes exactly these runs."""


@dataclass(frozen=True)
class Stop:
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


def stop_for(a: Approval) -> Stop | None:
    """Where a run stops on the approval ``a``: paused while it is pending, ended when it was refused; None when the
    step goes on."""
    match a.status:
        case Status.PENDING:
            return Stop(RunStatus.PAUSED, approval=a)
        case Status.REJECTED:
            return Stop(RunStatus.REJECTED, approval=a, reason=a.reason or "rejected")
        case Status.EXPIRED:
            drifted = a.reason is not None and a.reason.startswith(DRIFTED)
            why = a.reason if drifted else "the approval expired without a decision"
            return Stop(RunStatus.EXPIRED, approval=a, reason=why)
        case Status.CANCELLED:
            return Stop(RunStatus.CANCELLED, approval=a, reason=a.reason or "cancelled")
        case _:
            return None


def paused_by_halt(exc: Halted) -> Stop:
    """The run pauses where the stop switch refused a step (a tool, a gate, an agent's call), saying so; the lift
    resumes exactly these runs."""
    return Stop(RunStatus.PAUSED, reason=f"{HALTED_PREFIX}{exc.message}")
