"""The reviewers' notices (the Slack bot is the notifier): a card for each new approval, its update after each
change, and an FYI for each action that ran without a person but for a person to see (notify tier, or let through
by a Trust: what a Trust lets through is seen, not only granted)."""

from __future__ import annotations

from hitl.engine.subscribers.facts import Allowed, Cancelled, Decided, Expired, Fact, Proposed, Service

__all__ = ["Notifications"]


class Notifications:
    """Tells the service's notifier (an FYI's job is queued by the service itself, before the call goes ahead)."""

    observes = (Proposed, Allowed, Decided, Expired, Cancelled)

    def wants(self, fact: Fact, service: Service) -> bool:
        """An allowed call only when it is told to reviewers (notify, or let through by a Trust); the rest only
        with a notifier in this process."""
        return fact.verdict.told if isinstance(fact, Allowed) else service.notifier is not None

    async def observe(self, fact: Fact, service: Service) -> None:
        if isinstance(fact, Allowed):  # first: the fact of every allowed call, most of which need no notice
            if fact.verdict.told:
                await _fyi(fact, service)
            return
        notifier = service.notifier
        if notifier is None:
            return
        if isinstance(fact, Proposed):
            await notifier.approval_requested(fact.approval)
        elif isinstance(fact, Decided):
            await notifier.approval_changed(fact.approval, queued=True)  # its card update was queued with it
        else:
            await notifier.approval_changed(fact.approval)


async def _fyi(fact: Allowed, service: Service) -> None:
    """The FYI job was queued with the call's audit entry, before it went ahead; a notifier here posts it now (with
    none in this process, `hitl serve` on the same store posts it)."""
    if service.notifier is not None:
        reason = "; ".join(fact.verdict.reasons)
        request = fact.request
        await service.notifier.action_notified(
            tool=request.tool, args=fact.action.clean, session_id=request.session_id, reason=reason
        )
