"""Reminders: one in a card's thread before its approval expires, once across replicas and restarts, calling by name
each person who may still decide it (so each is reminded once). It is due at ``expires_at - min(reminder_before,
timeout / 4)``: a short approval is not reminded moments after its card was posted."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.mentions import mentions
from hitl.bot.views.blocks import when
from hitl.bot.views.escape import label
from hitl.engine.domain.models import Approval, Tier

__all__ = ["Reminders", "remind_at"]


def remind_at(approval: Approval, *, before: float) -> float:
    """When ``approval``'s reminder is due: ``before`` (hitl.yaml's ``reminder_before``) ahead of its expiry, or a
    quarter of its timeout when that is sooner to the deadline."""
    timeout = max(approval.expires_at - approval.created_at, 0.0)
    return approval.expires_at - min(before, timeout / 4)


class Reminders:
    """Posts the reminders the sweep finds due. ``members_of``: a role's members as ``hitl.yaml`` lists them."""

    def __init__(self, floor: Floor, *, members_of: Callable[[str], Sequence[str]] = lambda role: ()) -> None:
        self.floor = floor
        self.members_of = members_of

    def due(self, approval: Approval, *, now: float) -> bool:
        """Whether ``approval``'s reminder is due at ``now`` (never once it expired, nor with reminders off)."""
        before = self.floor.spec.reminder_before
        return bool(before) and remind_at(approval, before=before) <= now < approval.expires_at

    async def remind(self, approval: Approval) -> bool:
        """Post one reminder in the card's thread (once across replicas and restarts; a group card gets one for
        all its members, when the first of them nears its expiry). Returns whether this call posted it."""
        floor = self.floor
        ref = await floor.store.messages.get(approval.id)
        if ref is None:
            return False
        shown = await floor.store.messages.shown_on(ref)
        key, bound = f"remind:{approval.id}", approval.action_hash
        if len(shown) > 1:  # one reminder per group card, whichever member's expiry brings it
            key, bound = f"remind:{min(shown)}", hashlib.sha256(f"{ref.channel}|{ref.ts}".encode()).hexdigest()
        claim = await floor.once(key, bound)
        if claim is None:
            return False
        role = label(approval.required_role or "any reviewer", 40)
        if len(shown) > 1:
            text = (
                f":alarm_clock: Requests on this card start expiring {when(approval.expires_at)} and still need "
                f"{role} approval. Open the card to decide them."
            )
        elif approval.tier is Tier.SELF:  # no reviewer's approval: its one person's confirmation
            text = f":alarm_clock: `{approval.id}` expires {when(approval.expires_at)} and waits for your confirmation"
        else:
            text = (
                f":alarm_clock: `{approval.id}` expires {when(approval.expires_at)} and still needs "
                f"{role} approval ({len(approval.approvers)} of {approval.quorum})."
            )
        if called := mentions(self._waited_on(approval)):
            text = f"{called}: {text}"
        await floor.call(
            "chat.postMessage", floor.client.chat_postMessage, channel=ref.channel, thread_ts=ref.ts, text=text
        )
        await floor.done(key, claim)
        return True

    def _waited_on(self, approval: Approval) -> list[str]:
        """Who may still decide ``approval``: its role's members (and its backup role's, once handed on), but
        neither the requester nor anyone who voted already; a ``self`` approval's one person."""
        if approval.tier is Tier.SELF:
            return [approval.on_behalf_of] if approval.on_behalf_of and not approval.decisions else []
        roles = [approval.required_role or ""]
        if approval.backup_role and approval.handed_on(self.floor.clock.now()):
            roles.append(approval.backup_role)
        done = {approval.requester, *approval.approvers}
        return [m for role in roles if role for m in self.members_of(role) if m not in done]
