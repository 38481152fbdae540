"""Spot checks: a sample of the actions that ran without a person is put to reviewers after the fact
(``oversight.spot_check``), as an approval of its own that no caller waits on and nothing executes."""

from __future__ import annotations

from hitl.engine.domain.sampling import sampled
from hitl.engine.subscribers.facts import Allowed, Fact, Proposed, Service

__all__ = ["SpotChecks"]


class SpotChecks:
    """Samples each allowed action at its tool's and tier's rate (a batch is not sampled)."""

    observes = (Allowed,)

    def wants(self, fact: Fact, service: Service) -> bool:
        """Only when spot checks are configured at all (most deployments: never, and then at no cost)."""
        return service.spot_check.configured

    async def observe(self, fact: Fact, service: Service) -> None:
        if not isinstance(fact, Allowed) or fact.request.batch is not None:
            return
        request, verdict, action = fact.request, fact.verdict, fact.action
        rate = service.spot_check.rate_for(request.tool, str(verdict.tier))
        if not rate or not sampled(action.dedupe, rate):  # no hash unless spot checks are on
            return
        check = service.drafts.spot_check(request, verdict, action, now=fact.now)
        stored, created = await service.store.approvals.create(check)
        if created:
            await service.publish(Proposed(stored))
