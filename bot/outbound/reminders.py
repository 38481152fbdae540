"""Reminders: one in a card's thread before its approval expires, once across replicas and restarts."""

from __future__ import annotations

import hashlib

from hitl.bot.outbound.floor import Floor
from hitl.bot.views.blocks import when
from hitl.bot.views.escape import label
from hitl.engine.domain.models import Approval

__all__ = ["Reminders"]


class Reminders:
    """Posts the reminders the sweep finds due."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor

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
        else:
            text = (
                f":alarm_clock: `{approval.id}` expires {when(approval.expires_at)} and still needs "
                f"{role} approval ({len(approval.approvers)} of {approval.quorum})."
            )
        await floor.call(
            "chat.postMessage", floor.client.chat_postMessage, channel=ref.channel, thread_ts=ref.ts, text=text
        )
        await floor.done(key, claim)
        return True
