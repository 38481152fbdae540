"""Events for the outside context (webhooks): what happened, queued durably by whichever process made it happen.

An agent process, ``hitl run`` and ``hitl serve`` all change approvals; each queues the events of its own changes
as jobs in the shared store (one job per subscriber), right after the change. ``hitl serve`` delivers them
(``hitl.api.webhooks``), retrying with backoff, so a receiver hears about an approval an agent created even when
no server was up at the time. Each event has a stable id (``approval.decided:<id>:v<version>``): delivery is at
least once, and receivers deduplicate on it.

Each event is queued right after the change it reports, with the approval as it is then. A decision's events also
share its outbox: the store writes an :data:`EVENT_JOB` with the decision, in its atomic step, beside the card
update and the run's resume, and ``hitl serve`` turns it into the events the approval implies
(:meth:`Outbox.catch_up`) if the process that decided died before queueing them. So no crash loses a decided event.
An approval's ``created`` event has no such job: ``hitl serve``'s sweep queues the events of every pending approval
that lacks one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hitl.engine.config.api import EventKind, WebhookSpec
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import ClaimRefused
from hitl.engine.ports import Clock, Store
from hitl.engine.process.workers import worker_name

__all__ = [
    "EVENT_JOB",
    "FYI_JOB",
    "WEBHOOK_JOB",
    "EventSink",
    "Outbox",
    "approval_data",
    "approval_event",
    "flag_event",
    "is_flag",
]

EVENT_JOB = "event"
"""Written with a decision in its atomic step (payload ``{"approval_id": ...}``): queue the approval's events."""
WEBHOOK_JOB = "webhook"
FYI_JOB = "fyi"
"""A NOTIFY-tier call that ran in a process with no notifier (an agent, ``hitl mcp``, the API): ``hitl serve``
posts its FYI."""
_EVENT = "event"
"""The action hash recorded on an event's claim (the claim only says "queued"; nothing is hashed)."""


class EventSink(Protocol):
    """Where the engine reports events; :class:`Outbox` queues them for delivery."""

    @property
    def decision_jobs(self) -> tuple[str, ...]:
        """Kinds of durable job a decision writes in its atomic step for its events (:data:`EVENT_JOB`); empty
        when the sink is told of decisions as they happen instead."""
        ...

    async def emit(self, kind: EventKind, event_id: str, data: dict[str, Any]) -> None:
        """Queue one event (once, however often it is emitted)."""
        ...


def approval_data(a: Approval, view: Presentation | None = None) -> dict[str, Any]:
    """What an approval event carries: identity and state, and its one view as every surface draws it (``view``;
    built from the approval alone without one), never the evidence (untrusted, possibly sensitive: the view names
    it by its digest)."""
    canonical, digest = (view or present(a)).recorded()
    return {
        "view": canonical,
        "view_digest": digest,
        "approval": {
            "id": a.id,
            "status": str(a.status),
            "version": a.version,
            "tool": a.tool,
            "action_hash": a.action_hash,
            "session_id": a.session_id,
            "tier": str(a.tier),
            "required_role": a.required_role,
            "quorum": a.quorum,
            "expires_at": a.expires_at,
            "decisions": [
                {
                    "reviewer": d.reviewer,
                    "decision": str(d.kind),
                    "at": d.at,
                    "via": d.via,
                    "reason": d.reason,
                    **({"acting_for": d.acting_for} if d.acting_for else {}),
                }
                for d in a.decisions
            ],
        },
    }


def is_flag(a: Approval) -> bool:
    """Whether ``a`` is a spot check a reviewer flagged (its event is ``spot_check.flagged``)."""
    return is_spot_check(a) and a.status is Status.REJECTED and bool(a.decisions)


def flag_event(a: Approval, view: Presentation | None = None) -> tuple[EventKind, str, dict[str, Any]] | None:
    """The event a spot check a reviewer flagged is (kind, id, data), or None for any other approval."""
    if not is_flag(a):
        return None
    flag = {"by": a.decisions[-1].reviewer, "note": a.reason}
    return EventKind.SPOT_CHECK_FLAGGED, f"spot_check.flagged:{a.id}", {**approval_data(a, view), "flag": flag}


def approval_event(a: Approval, *, created: bool = False) -> tuple[EventKind, str] | None:
    """The event a change of ``a`` is, if any: created, a decision recorded (a vote toward a quorum included),
    or expired. Execution progress (executing, executed) is not an approval event."""
    if created:
        return EventKind.APPROVAL_CREATED, f"approval.created:{a.id}"
    if a.status is Status.EXPIRED:
        return EventKind.APPROVAL_EXPIRED, f"approval.expired:{a.id}"
    if a.decisions and a.decisions[-1].version == a.version - 1:
        return EventKind.APPROVAL_DECIDED, f"approval.decided:{a.id}:v{a.version}"
    return None


class Outbox:
    """Queues each event once per subscriber to it, as a durable ``webhook`` job.

    An event is queued under an execution claim on ``event:<event id>``: whoever emits it first (the process that
    made the change, or ``hitl serve``'s sweep catching up after a crash) queues it, and later emissions of the
    same event are no-ops. A queuer that died half-way leaves its claim to expire; the next one queues again
    (subscribers may see an event twice, never not at all).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        webhooks: list[WebhookSpec],
        *,
        holder: str | None = None,
        view_of: Callable[[Approval], Presentation] = present,
    ) -> None:
        self.store = store
        self.clock = clock
        self.webhooks = webhooks
        self.holder = holder or worker_name("events")
        self.view_of = view_of
        """Each approval's one view, in the served ``hitl.yaml``'s words (its events carry it)."""

    async def emit(self, kind: EventKind, event_id: str, data: dict[str, Any]) -> None:
        hooks = [h for h in self.webhooks if kind in h.events]
        if not hooks:
            return
        key = f"event:{event_id}"
        now = self.clock.now()
        try:
            claim = await self.store.ledger.claim(key, action_hash=_EVENT, holder=self.holder, now=now, lease=60.0)
        except ClaimRefused:
            return  # being queued right now by another process
        if not claim.acquired:
            return  # queued already
        event = {"id": event_id, "type": str(kind), "at": now, "data": data}
        for hook in hooks:
            await self.store.jobs.enqueue(
                WEBHOOK_JOB,
                {"event": event, "url": hook.url, "secret_env": hook.secret_env, "attempt": 1, "not_before": now},
                now=now,
            )
        await self.store.ledger.record_outcome(
            key, holder=self.holder, attempt=claim.attempt, ok=True, result={}, now=self.clock.now()
        )

    @property
    def decision_jobs(self) -> tuple[str, ...]:
        """:data:`EVENT_JOB`, when a subscriber listens for what a decision can cause."""
        decided = {EventKind.APPROVAL_DECIDED, EventKind.SPOT_CHECK_FLAGGED}
        return (EVENT_JOB,) if any(decided & set(h.events) for h in self.webhooks) else ()

    async def catch_up(self, approval: Approval) -> None:
        """Queue whatever events ``approval``'s state implies and nobody queued: its creation, each decision, and
        a flag of a spot check. A decision's :data:`EVENT_JOB` comes here; so does the sweep of pending approvals."""
        view = self.view_of(approval)
        data = approval_data(approval, view)
        await self.emit(EventKind.APPROVAL_CREATED, f"approval.created:{approval.id}", data)
        flagged = flag_event(approval, view)
        if flagged is not None:
            await self.emit(*flagged)
        for d in approval.decisions:
            event_id = f"approval.decided:{approval.id}:v{d.version + 1}"
            await self.emit(EventKind.APPROVAL_DECIDED, event_id, data)
