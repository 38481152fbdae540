"""Practice twins (``oversight.practice``): a sample of real approvals gets a copy with one planted defect, to
measure whether reviewers catch it. A twin grants nothing and nothing executes it.

A twin is drawn when its real approval is proposed but created only at its moment, a random while later
(:func:`~hitl.engine.domain.practice.post_after`): until then it is a durable :data:`TWIN_JOB` in the store's job
queue, and nothing shows it. At its moment ``hitl serve`` (:class:`~hitl.engine.runtime.practice.TwinPlanting`)
stores it as created then and announces it, so its card, its ``approval.created`` event and its times tell the
story any approval created at that moment tells. A twin is planted whole or not at all: its id is drawn with it,
so a planting repeated after a crash finds the one already stored.
"""

from __future__ import annotations

import logging
from typing import Any

from hitl.engine.consequences.computing import with_consequence
from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.practice import is_practice, picked_for_practice, planted, post_after
from hitl.engine.domain.records import AuditEntry
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import InvalidInput, NotFound
from hitl.engine.subscribers.facts import Fact, Proposed, Service

__all__ = ["TWIN_JOB", "PracticeTwins", "plant"]

log = logging.getLogger(__name__)

TWIN_JOB = "practice_twin"
"""A twin waiting for its moment (payload ``{"twin": <the drawn approval>, "at": <epoch seconds>}``, and
``"consequence"``: the audit entry of its consequence, when its tool has one)."""


async def plant(service: Service, twin: Approval, consequence: AuditEntry | None = None) -> None:
    """Store ``twin`` as created now and announce it (once: planting it again finds the one stored).

    ``consequence``: the audit entry of the consequence computed when it was drawn, recorded just before it is
    stored and at the moment it is created, as a real approval's is (its audit then tells the same story)."""
    twin = planted(twin, service.clock.now())
    if consequence is not None and not await _stored(service, twin.id):
        await service.store.audit.append(consequence.model_copy(update={"at": twin.created_at}))
    stored, created = await service.store.approvals.create(twin)
    if created:
        await service.publish(Proposed(stored))


async def _stored(service: Service, approval_id: str) -> bool:
    """Whether ``approval_id`` is stored already (a planting repeated after a crash: its consequence is recorded)."""
    try:
        await service.store.approvals.get(approval_id)
    except NotFound:
        return False
    return True


class PracticeTwins:
    """Draws a twin of each sampled new approval (never of a spot check or of a twin) and plants it at its moment:
    at once without a ``delay``, else through the job queue."""

    observes = (Proposed,)

    async def observe(self, fact: Fact, service: Service) -> None:
        if not isinstance(fact, Proposed):
            return
        real = fact.approval
        # A requester's own confirmation (tier self) is nobody's review: no reviewer is measured on it.
        if is_spot_check(real) or is_practice(real) or real.tier is Tier.SELF:
            return
        if not picked_for_practice(real.id, service.practice.rate_for(real.tool, str(real.tier))):
            return
        now = service.clock.now()
        try:
            twin = service.drafts.twin(real, service.practice, now=now)
        except InvalidInput as exc:  # arguments the schema refuses are not planted (nothing unchecked enters)
            log.warning("a practice defect for %s does not fit its schema; not planted: %s", real.tool, exc)
            return
        # Computed here, in the process that computed its real one's (a consequence given in Python lives only
        # there), for its own arguments under the same bounds. Its counts are left out: a practice approval counts
        # only in the practice measures.
        given = service.given_consequences.get(twin.tool)
        twin, computed = await with_consequence(
            service.consequences, service.policy, service.redactor, twin, given=given, now=now
        )
        audit = computed.audit if computed is not None else None
        moment = post_after(service.practice, now)
        if moment <= now:
            await plant(service, twin, audit)
            return
        payload: dict[str, Any] = {"twin": twin.model_dump(mode="json"), "at": moment}
        if audit is not None:
            payload["consequence"] = audit.model_dump(mode="json")
        await service.store.jobs.enqueue(TWIN_JOB, payload, now=now)
