"""Hand-ons: an unanswered approval handed on to its backup role before it expires, once across replicas and
restarts. Its card is posted again with live buttons and the backup role's members mentioned; the earlier card
says where it went. Its original reviewers may still decide; votes cast still count."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence

from slack_sdk.errors import SlackApiError

from hitl.bot.outbound.floor import Floor
from hitl.bot.views.escape import label
from hitl.engine.domain.models import Approval
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.domain.tally import Outcome, counts_for

__all__ = ["HandOns"]

log = logging.getLogger(__name__)


class HandOns:
    """Hands approvals on. ``changed``: queues a card update (a group card redrawn without the one handed on);
    ``members_of``: a role's members as ``hitl.yaml`` lists them (Slack user and user-group ids), whom a hand-on
    mentions."""

    def __init__(
        self,
        floor: Floor,
        *,
        changed: Callable[[Approval], Awaitable[None]],
        members_of: Callable[[str], Sequence[str]],
    ) -> None:
        self.floor = floor
        self.changed = changed
        self.members_of = members_of

    async def hand_on(self, approval: Approval, ref: MessageRef) -> bool:
        """Hand an unanswered approval on to its backup role: audited, its card posted again (the backup role's
        members mentioned), the earlier card marked, their Home tabs brought up to date. Returns whether this call
        handed it on."""
        floor = self.floor
        key = f"handon:{approval.id}"
        claim = await floor.once(key, approval.action_hash)
        if claim is None:
            return False
        backup = approval.backup_role or ""
        await floor.store.audit.append(
            AuditEntry(
                at=floor.clock.now(),
                actor="system",
                event="handed_on",
                approval_id=approval.id,
                version=approval.version,
                action_hash=approval.action_hash,
                detail=f"handed on to {backup} before it expires; {approval.required_role or 'its reviewers'} may "
                f"still decide ({len(approval.approvers)} of {approval.quorum} votes cast)"[:500],
            )
        )
        current = await floor.store.approvals.get(approval.id)
        moved = await self._post_again(current, ref, backup)
        await self._mark_earlier(approval, ref, backup)
        await floor.done(key, claim, channel=moved.channel, ts=moved.ts)
        now = floor.clock.now()
        if not is_practice(approval):  # a practice copy counts only in the practice measures
            counts = counts_for(approval.tool, str(approval.tier), Outcome.HANDED_ON, now=now)
            await floor.store.tallies.add(counts, now=now)
        await floor.carded(current)  # the backup reviewers' Home tabs
        return True

    async def _post_again(self, current: Approval, ref: MessageRef, backup: str) -> MessageRef:
        """Post ``current``'s card again in the card's channel, mentioning the backup role; it is the card now."""
        floor = self.floor
        text, blocks = await floor.draw([current])
        mentions = " ".join(m for m in map(_mention, self.members_of(backup)) if m) or f"the {backup} role"
        notice = {
            "type": "section",
            "block_id": f"hitl_handed_on:{current.id}",
            "text": {
                "type": "mrkdwn",
                "text": f":arrow_right_hook: *Handed on to {label(backup, 40)}* before it expires: {mentions}, "
                f"this waits on you too.",
            },
        }
        posted = await floor.call(
            "chat.postMessage",
            floor.client.chat_postMessage,
            channel=ref.channel,
            text=f"Handed on to {backup[:40]}: {text}",
            blocks=[notice, *blocks],
        )
        moved = MessageRef(channel=str(posted["channel"]), ts=str(posted["ts"]))
        await floor.store.messages.set(current.id, moved)
        return moved

    async def _mark_earlier(self, approval: Approval, ref: MessageRef, backup: str) -> None:
        """Say on the earlier card where ``approval`` went (a group card is drawn again without it)."""
        floor = self.floor
        others = [x for x in await floor.store.messages.shown_on(ref) if x != approval.id]
        if others:
            await self.changed(await floor.store.approvals.get(others[0]))
            return
        gone = {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f":arrow_right_hook: `{approval.id}` was handed on to "
                f"{label(backup, 40)}; decide it on the newer card.",
            },
        }
        try:
            await floor.call(
                "chat.update",
                floor.client.chat_update,
                channel=ref.channel,
                ts=ref.ts,
                text=f"Handed on to {backup[:40]}: decide it on the newer card",
                blocks=[gone],
            )
        except SlackApiError as exc:  # the newer card decides it; the older keeps buttons bound to its version
            log.warning("could not mark the earlier card of %s: %s", approval.id, exc.response.get("error"))


def _mention(member: str) -> str:
    """A role member as a Slack mention: ``<@U…>`` for a person, ``<!subteam^S…>`` for a user group ("" for an id
    Slack does not know, such as ``cli:alice``)."""
    if re.fullmatch(r"[UW][A-Z0-9_]{2,20}", member):
        return f"<@{member}>"
    if re.fullmatch(r"S[A-Z0-9_]{2,20}", member):
        return f"<!subteam^{member}>"
    return ""
