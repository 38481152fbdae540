"""Webhook events (:mod:`hitl.engine.subscribers.events`) for ``api.webhooks``' subscribers: an approval created,
decided (a vote toward a quorum too), expired or cancelled, and a spot check flagged, queued as each happens, with
the approval as it is then. A decision's events are also in the job it wrote in its own atomic step
(:data:`~hitl.engine.subscribers.events.EVENT_JOB`): a process that dies before queueing them here loses none (each
event is queued once, whichever comes first)."""

from __future__ import annotations

from hitl.engine.subscribers.events import approval_data, approval_event, flag_event, is_flag
from hitl.engine.subscribers.facts import Cancelled, Decided, Expired, Fact, Proposed, Service

__all__ = ["Webhooks"]


class Webhooks:
    """Emits each approval fact's event to the service's event sink (none: no webhooks configured)."""

    observes = (Proposed, Decided, Expired, Cancelled)

    async def observe(self, fact: Fact, service: Service) -> None:
        events = service.events
        if events is None or not isinstance(fact, Proposed | Decided | Expired | Cancelled):
            return
        a = fact.approval
        found = approval_event(a, created=isinstance(fact, Proposed))
        flagging = isinstance(fact, Decided) and is_flag(a)
        if found is None and not flagging:
            return
        view = service.policy.spec.present(a)  # drawn once, for the events this fact is
        flagged = flag_event(a, view) if flagging else None
        if flagged is not None:
            await events.emit(*flagged)
        if found is not None:
            await events.emit(*found, approval_data(a, view))
