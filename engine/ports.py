"""Ports: what the engine needs from the outside world, as ``typing.Protocol``s.

Implementations live in ``engine.storage`` (stores), ``engine.clock`` (clocks) and the ``bot`` package
(Slack notifier). Every argument after the first is keyword-only so call sites stay readable.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Protocol, runtime_checkable

from engine.domain.decide import DecideCommand
from engine.domain.models import Approval, Status
from engine.domain.policy import WindowStats
from engine.domain.records import AuditEntry, Claim, Job, MessageRef, Page, TrustGrant

__all__ = ["Clock", "Notifier", "Store"]


@runtime_checkable
class Clock(Protocol):
    """Source of the current time in epoch seconds (UTC)."""

    def now(self) -> float: ...


class Store(Protocol):
    """Durable state for approvals, executions, runs, trust, counters, audit and message mapping.

    Every method is atomic on its own. ``decide``, ``expire_due``, ``transition`` and ``claim`` are
    compare-and-swap steps: exactly one of any set of racing callers wins.
    """

    async def create_approval(self, approval: Approval) -> tuple[Approval, bool]:
        """Store ``approval`` unless one with its id exists; returns the stored one and whether it is new.

        Approval ids derive from the dedupe key, so re-asking the same action returns the same approval.
        """
        ...

    async def get_approval(self, approval_id: str) -> Approval:
        """The approval, or :class:`~engine.errors.NotFound`."""
        ...

    async def list_pending(
        self,
        *,
        roles: Collection[str] | None = None,
        exclude_requester: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        """Pending approvals, oldest first; cost depends on ``limit``, not on the total."""
        ...

    async def decide(self, cmd: DecideCommand, *, now: float) -> Approval:
        """Apply one decision atomically or raise :class:`~engine.errors.DecisionRefused`. Both are audited."""
        ...

    async def wait_changed(self, approval_id: str, *, after_version: int, timeout: float) -> Approval:
        """Return the approval once its version passes ``after_version``, or as it is after ``timeout`` seconds.

        Redis wakes waiters through pub/sub from the deciding script; SQLite polls with backoff.
        """
        ...

    async def expire_due(self, *, now: float, limit: int = 100) -> list[Approval]:
        """Expire pending approvals whose deadline passed; returns those this call expired."""
        ...

    async def transition(
        self,
        approval_id: str,
        *,
        target: Status,
        expected_version: int | None,
        actor: str,
        now: float,
        reason: str | None = None,
    ) -> Approval:
        """Move an approval along the state machine (cancel, executing, executed, failed), audited."""
        ...

    async def claim(
        self, key: str, *, action_hash: str, holder: str, now: float, lease: float, retry_failed: bool = False
    ) -> Claim:
        """Claim execution under an idempotency key (see :class:`~engine.records.Claim`)."""
        ...

    async def record_outcome(
        self, key: str, *, holder: str, attempt: int, ok: bool, result: dict[str, Any], now: float
    ) -> Claim:
        """Record the outcome of the current attempt; a fenced (superseded) holder is refused."""
        ...

    async def get_claim(self, key: str) -> Claim | None: ...

    async def save_checkpoint(self, run_id: str, data: dict[str, Any], *, expected_version: int, now: float) -> int:
        """Save a run checkpoint if its version is still ``expected_version`` (0 for a new run)."""
        ...

    async def load_checkpoint(self, run_id: str) -> tuple[dict[str, Any], int] | None: ...

    async def paused_runs(self, *, limit: int = 500) -> list[str]:
        """Ids of runs whose last checkpoint says ``paused`` (so a lost resume can be recovered)."""
        ...

    async def grant_trust(self, session_id: str, tool: str, *, until: float, by: str, now: float) -> None: ...

    async def list_trust(self, session_id: str, *, now: float) -> list[TrustGrant]: ...

    async def list_all_trust(self, *, now: float, limit: int = 200) -> list[TrustGrant]:
        """Active grants across sessions (for ``/hitl trust list``)."""
        ...

    async def revoke_trust(self, session_id: str, tool: str, *, by: str, now: float) -> bool: ...

    async def window_add(self, key: str, *, amount: float, now: float, window: float, event_id: str) -> WindowStats:
        """Atomically read the window's prior stats and add this event to it."""
        ...

    async def window_stats(self, key: str, *, now: float, window: float) -> WindowStats: ...

    async def append_audit(self, entry: AuditEntry) -> None: ...

    async def audit(self, *, approval_id: str | None = None, limit: int = 1000) -> list[AuditEntry]:
        """Audit entries, oldest first."""
        ...

    async def set_message(self, approval_id: str, ref: MessageRef) -> None: ...

    async def get_message(self, approval_id: str) -> MessageRef | None: ...

    async def approval_for_message(self, ref: MessageRef) -> str | None: ...

    async def enqueue_job(self, kind: str, payload: dict[str, Any], *, now: float) -> str:
        """Queue a job durably; returns its id."""
        ...

    async def claim_jobs(self, consumer: str, *, kind: str, limit: int, now: float, lease: float) -> list[Job]:
        """Jobs of ``kind`` for ``consumer``: new ones, and ones another consumer claimed over ``lease`` seconds
        ago without acknowledging (it crashed). Delivery is at least once; handlers must be idempotent."""
        ...

    async def ack_job(self, job_id: str) -> None:
        """Mark a job done; it is never delivered again."""
        ...

    async def close(self) -> None: ...


class Notifier(Protocol):
    """Tells reviewers about approvals. The Slack bot implements it; the CLI uses none."""

    async def approval_requested(self, approval: Approval) -> None: ...

    async def approval_changed(self, approval: Approval) -> None: ...

    async def action_notified(self, *, tool: str, args: dict[str, Any], session_id: str, reason: str) -> None: ...
