"""The approval state machine: one table, nothing else moves state."""

from __future__ import annotations

from hitl.engine.domain.models import Status
from hitl.engine.errors import IllegalTransition

__all__ = ["TERMINAL", "TRANSITIONS", "check_transition", "sources_of"]

TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.PENDING: frozenset({Status.APPROVED, Status.REJECTED, Status.EXPIRED, Status.CANCELLED, Status.SUPERSEDED}),
    # approved -> superseded | expired: its consequence drifted before it ran (asked again, or expired as drifted).
    Status.APPROVED: frozenset({Status.EXECUTING, Status.SUPERSEDED, Status.EXPIRED}),
    # executing -> executing is a recovery: a new claimant takes over a dead holder's execution.
    Status.EXECUTING: frozenset({Status.EXECUTED, Status.FAILED, Status.EXECUTING}),
    Status.REJECTED: frozenset(),
    Status.EXPIRED: frozenset(),
    Status.CANCELLED: frozenset(),
    Status.SUPERSEDED: frozenset(),
    Status.EXECUTED: frozenset(),
    Status.FAILED: frozenset(),
}

TERMINAL: frozenset[Status] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


def check_transition(current: Status, target: Status, *, approval_id: str = "") -> None:
    """Raise :class:`IllegalTransition` unless ``current -> target`` is in the table."""
    if target not in TRANSITIONS[current]:
        raise IllegalTransition(
            f"approval {approval_id or '?'} cannot move from {current} to {target}",
            approval_id=approval_id,
            current=str(current),
            target=str(target),
        )


def sources_of(target: Status) -> frozenset[Status]:
    """Every state from which ``target`` may be reached (stores check this atomically)."""
    return frozenset(s for s, nxt in TRANSITIONS.items() if target in nxt)
