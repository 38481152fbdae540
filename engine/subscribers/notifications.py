"""The reviewers' notices (the Slack bot is the notifier): a card for each new approval, its update after each
change, and an FYI for each action that ran without a person but for a person to see (notify tier, or let through
by a Trust: what a Trust lets through is seen, not only granted)."""

from __future__ import annotations

from hitl.engine.domain.models import Tier
from hitl.engine.events import FYI_JOB
from hitl.engine.facts import Allowed, Cancelled, Decided, Expired, Fact, Proposed, Service

__all__ = ["Notifications"]


class Notifications:
    """Tells the service's notifier; with none in this process, an FYI is queued for ``hitl serve`` to post."""

    async def observe(self, fact: Fact, service: Service) -> None:
        notifier = service.notifier
        match fact:
            case Proposed(approval=a) if notifier is not None:
                await notifier.approval_requested(a)
            case Decided(approval=a) if notifier is not None:
                await notifier.approval_changed(a, queued=True)  # its card update was queued with the decision
            case Expired(approval=a) | Cancelled(approval=a) if notifier is not None:
                await notifier.approval_changed(a)
            case Allowed(request=request, verdict=verdict, action=action, now=now):
                if verdict.tier is not Tier.NOTIFY and verdict.rule != "trusted":
                    return
                reason = "; ".join(verdict.reasons)
                tool, args, session_id = request.tool, action.clean, request.session_id
                if notifier is not None:
                    await notifier.action_notified(tool=tool, args=args, session_id=session_id, reason=reason)
                else:  # no Slack in this process: `hitl serve` on the same store posts it
                    fyi = {"tool": tool, "args": args, "session_id": session_id, "reason": reason}
                    await service.store.jobs.enqueue(FYI_JOB, fyi, now=now)
