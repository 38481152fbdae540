"""The oversight measures' counts (:mod:`hitl.engine.domain.tally`): asked, autonomous, decided, expired, and the
spot checks' and practice approvals' own. A count never blocks an action."""

from __future__ import annotations

from hitl.engine.domain.models import Approval
from hitl.engine.domain.practice import caught, is_practice
from hitl.engine.domain.spot_checks import checked_tool, is_spot_check
from hitl.engine.domain.tally import Outcome, counts_for, decision_outcome
from hitl.engine.subscribers.facts import Allowed, Decided, Expired, Fact, Proposed, Service

__all__ = ["Tallies"]


class Tallies:
    """Counts each fact under its tool and tier; practice approvals count only in the practice measures."""

    observes = (Proposed, Allowed, Decided, Expired)

    async def observe(self, fact: Fact, service: Service) -> None:
        if isinstance(fact, Allowed):  # first: the fact of every allowed call, counted without a step between
            now = fact.now
            counts = counts_for(fact.request.tool, str(fact.verdict.tier), Outcome.AUTONOMOUS, now=now, latency=None)
            await service.store.tallies.add(counts, now=now)
        elif isinstance(fact, Proposed):
            await _asked(fact.approval, service)
        elif isinstance(fact, Decided):
            a = fact.approval
            if a.decisions and a.decisions[-1].acting_for is not None and not is_practice(a):
                await _count(service, a.tool, str(a.tier), Outcome.UNDER_DELEGATION, service.clock.now())
            await _decided(a, decision_outcome(fact.kind, a.status), service)
        elif isinstance(fact, Expired) and not is_spot_check(fact.approval) and not is_practice(fact.approval):
            a = fact.approval  # no decision about an action: an expiry of a spot check or a practice copy
            await _count(service, a.tool, str(a.tier), Outcome.EXPIRED, service.clock.now())


async def _asked(a: Approval, service: Service) -> None:
    if is_spot_check(a):  # counted for the audit yield, under the tool and tier it looks at
        await _count(service, checked_tool(a), str(a.metadata.get("tier", "")), Outcome.SPOT_CHECKED, a.created_at)
    elif is_practice(a):  # never in the other measures
        await _count(service, a.tool, str(a.tier), Outcome.PRACTICE, a.created_at)
    else:
        await _count(service, a.tool, str(a.tier), Outcome.ASKED, a.created_at)


async def _decided(a: Approval, outcome: Outcome | None, service: Service) -> None:
    if outcome is None:  # not final: a first vote of two
        return
    now = service.clock.now()
    if is_practice(a):
        found = caught(a)
        if found is not None:
            await _count(
                service, a.tool, str(a.tier), Outcome.PRACTICE_CAUGHT if found else Outcome.PRACTICE_MISSED, now
            )
    elif is_spot_check(a):  # counts toward its tool's correction rate (a flag is a correction) and audit yield
        tool, tier = checked_tool(a), str(a.metadata.get("tier", ""))
        await _count(service, tool, tier, outcome, now)
        if outcome is Outcome.REJECTED:
            await _count(service, tool, tier, Outcome.SPOT_FLAGGED, now)
    else:
        await _count(service, a.tool, str(a.tier), outcome, now, latency=now - a.created_at)


async def _count(
    service: Service, tool: str, tier: str, outcome: Outcome, now: float, *, latency: float | None = None
) -> None:
    await service.store.tallies.add(counts_for(tool, tier, outcome, now=now, latency=latency), now=now)
