"""Planting practice twins at their moment (``hitl serve``'s background sweep): each twin drawn when its real
approval was proposed (:mod:`hitl.engine.subscribers.practice`) waits as a durable job, in whichever process drew
it, until its moment; then it is stored as created that moment and announced (its card, its webhook event).

The job outlives a restart: a twin whose moment came while no ``hitl serve`` ran is planted by the next sweep, as
created then. A job is acknowledged only after its twin is stored, and storing it again finds it: a crash in
between plants it once, never twice, and its card and ``approval.created`` event come from the sweeps that catch up
on any approval whose creator died (the card sweep, the webhooks' catch-up).
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from hitl.engine.domain.models import Approval
from hitl.engine.domain.records import AuditEntry
from hitl.engine.subscribers.facts import Service
from hitl.engine.subscribers.practice import TWIN_JOB, plant

__all__ = ["LEASE", "TwinPlanting"]

log = logging.getLogger(__name__)

LEASE = 30.0
"""Seconds a claimed twin stays with this process. A twin claimed before its moment comes back once the lease runs
out, so it is planted up to this long after its moment (the moment is random anyway, and what is shown follows the
planting, not the moment)."""


class TwinPlanting:
    """A sweeper for ``hitl serve``'s background loop: plant the twins whose moment has come.

    Args:
        service: the service that stores and announces them (its subscribers card them and queue their events).
        consumer: this process's name among the job queue's consumers.
        batch: the twins claimed per sweep.
        lease: see :data:`LEASE`.
    """

    def __init__(self, service: Service, *, consumer: str, batch: int = 50, lease: float = LEASE) -> None:
        self.service = service
        self.consumer = consumer
        self.batch = batch
        self.lease = lease

    async def sweep(self) -> None:
        """Plant each claimed twin whose moment has come; one not yet due is left for a later sweep."""
        store, now = self.service.store, self.service.clock.now()
        jobs = await store.jobs.claim(self.consumer, kind=TWIN_JOB, limit=self.batch, now=now, lease=self.lease)
        for job in jobs:
            if float(job.payload.get("at", 0)) > now:
                continue  # not due: it comes back when the lease runs out
            try:
                twin = Approval.model_validate(job.payload.get("twin"))
                held = job.payload.get("consequence")
                consequence = AuditEntry.model_validate(held) if held is not None else None
            except ValidationError as exc:  # unreadable (not this hitl's draw): dropped, never left to block the rest
                log.error("a practice twin's job %s cannot be read; not planted: %s", job.id, exc)
            else:
                await plant(self.service, twin, consequence)
            await store.jobs.ack(job.id)
