"""Events for the outside world (webhooks): what happened, queued durably by whichever process made it happen.

An agent process, ``hitl run`` and ``hitl serve`` all change approvals; each queues the events of its own changes
as jobs in the shared store (one job per subscriber), right after the change. ``hitl serve`` delivers them
(``hitl.api.webhooks``), retrying with backoff, so a receiver hears about an approval an agent created even when
no server was up at the time. Each event has a stable id (``approval.decided:<id>:v<version>``): delivery is at
least once, and receivers deduplicate on it.
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.api_spec import EventKind, WebhookSpec
from engine.domain.models import Approval, Status
from engine.ports import Clock, JobQueue

__all__ = ["WEBHOOK_JOB", "EventSink", "Outbox", "approval_data", "approval_event"]

WEBHOOK_JOB = "webhook"


class EventSink(Protocol):
    """Where the engine reports events; :class:`Outbox` queues them for delivery."""

    async def emit(self, kind: EventKind, event_id: str, data: dict[str, Any]) -> None: ...


def approval_data(a: Approval) -> dict[str, Any]:
    """What an approval event carries: identity and state, never the evidence (untrusted, possibly sensitive)."""
    return {
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
                {"reviewer": d.reviewer, "decision": str(d.kind), "at": d.at, "via": d.via, "reason": d.reason}
                for d in a.decisions
            ],
        }
    }


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
    """Queues each event once per subscriber to it, as a durable ``webhook`` job."""

    def __init__(self, jobs: JobQueue, clock: Clock, webhooks: list[WebhookSpec]) -> None:
        self.jobs = jobs
        self.clock = clock
        self.webhooks = webhooks

    async def emit(self, kind: EventKind, event_id: str, data: dict[str, Any]) -> None:
        now = self.clock.now()
        for hook in self.webhooks:
            if kind not in hook.events:
                continue
            event = {"id": event_id, "type": str(kind), "at": now, "data": data}
            await self.jobs.enqueue(
                WEBHOOK_JOB,
                {"event": event, "url": hook.url, "secret_env": hook.secret_env, "attempt": 1, "not_before": now},
                now=now,
            )
