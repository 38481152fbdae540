"""Practice twins (``oversight.practice``): a sample of real approvals gets a copy with one planted defect, to
measure whether reviewers catch it. A twin grants nothing and nothing executes it."""

from __future__ import annotations

import logging

from hitl.engine.domain.practice import is_practice, picked_for_practice
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import InvalidInput
from hitl.engine.subscribers.facts import Fact, Proposed, Service

__all__ = ["PracticeTwins"]

log = logging.getLogger(__name__)


class PracticeTwins:
    """Plants a twin of each sampled new approval (never of a spot check or of a twin)."""

    observes = (Proposed,)

    async def observe(self, fact: Fact, service: Service) -> None:
        if not isinstance(fact, Proposed):
            return
        real = fact.approval
        if is_spot_check(real) or is_practice(real):
            return
        if not picked_for_practice(real.id, service.practice.rate_for(real.tool, str(real.tier))):
            return
        try:
            twin = service.drafts.twin(real, service.practice, now=service.clock.now())
        except InvalidInput as exc:  # arguments the schema refuses are not planted (nothing unchecked enters)
            log.warning("a practice defect for %s does not fit its schema; not planted: %s", real.tool, exc)
            return
        stored, created = await service.store.approvals.create(twin)
        if created:
            await service.publish(Proposed(stored))
