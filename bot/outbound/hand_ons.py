"""Hand-ons: an unanswered approval handed on to its backup role before it expires, once across replicas and
restarts. Its card is posted again with live buttons and the backup role's members mentioned, in the backup role's
channel (``slack.channels.<role>``; the card's own channel when it has none); the earlier card becomes one line
naming the approval's headline and linking to the new card. Its original reviewers may still decide; votes cast
still count."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from slack_sdk.errors import SlackApiError

from hitl.bot.outbound.floor import Floor
from hitl.bot.outbound.mentions import mentions
from hitl.bot.views.escape import label
from hitl.engine.domain.display import graphemes_cut
from hitl.engine.domain.models import Approval
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.records import AuditEntry, MessageRef
from hitl.engine.domain.tally import Outcome, counts_for

__all__ = ["HandOns"]

log = logging.getLogger(__name__)

_UNREACHABLE = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
"""Slack's refusals of a post for the channel itself (rather than for the message, or for now)."""


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
        await self._mark_earlier(current, ref, backup, moved)
        await floor.done(key, claim, channel=moved.channel, ts=moved.ts)
        now = floor.clock.now()
        if not is_practice(approval):  # a practice copy counts only in the practice measures
            counts = counts_for(approval.tool, str(approval.tier), Outcome.HANDED_ON, now=now)
            await floor.store.tallies.add(counts, now=now)
        await floor.carded(current)  # the backup reviewers' Home tabs
        return True

    async def _post_again(self, current: Approval, ref: MessageRef, backup: str) -> MessageRef:
        """Post ``current``'s card again in the backup role's channel (else the card's own), mentioning the backup
        role's members; it is the card now."""
        floor = self.floor
        text, blocks = await floor.draw([current])
        called = mentions(self.members_of(backup)) or f"the {label(backup, 40)} role"
        notice = {
            "type": "section",
            "block_id": f"hitl_handed_on:{current.id}",
            "text": {
                "type": "mrkdwn",
                "text": f":arrow_right_hook: *Handed on to {label(backup, 40)}* before it expires: {called}, "
                f"this waits on you too.",
            },
        }
        post = {"text": f"Handed on to {backup[:40]}: {text}", "blocks": [notice, *blocks]}
        desk = floor.spec.channels.get(backup)
        try:
            posted = await floor.call(
                "chat.postMessage", floor.client.chat_postMessage, channel=desk or ref.channel, **post
            )
        except SlackApiError as exc:
            if desk is None or exc.response.get("error") not in _UNREACHABLE:
                raise
            # A backup channel the bot cannot post in must not stop the hand-on: the card's own channel still
            # reaches the members it mentions.
            log.warning("cannot post in %s's channel %s (%s); handing on in the card's own", backup, desk, exc)
            posted = await floor.call("chat.postMessage", floor.client.chat_postMessage, channel=ref.channel, **post)
        moved = MessageRef(channel=str(posted["channel"]), ts=str(posted["ts"]))
        await floor.store.messages.set(current.id, moved)
        return moved

    async def _mark_earlier(self, approval: Approval, ref: MessageRef, backup: str, moved: MessageRef) -> None:
        """Make the earlier card one line: ``approval``'s headline, handed on to ``backup``, and a link to the card
        at ``moved`` (a group card is drawn again without it)."""
        floor = self.floor
        others = [x for x in await floor.store.messages.shown_on(ref) if x != approval.id]
        if others:
            await self.changed(await floor.store.approvals.get(others[0]))
            return
        headline = graphemes_cut(floor.view(approval).headline, 150)
        link = await floor.permalink(moved)
        try:
            await floor.call(
                "chat.update",
                floor.client.chat_update,
                channel=ref.channel,
                ts=ref.ts,
                text=f"{label(approval.tool, 80)} was handed on to {label(backup, 40)}: decide it on the newer card",
                blocks=[_gone(approval, headline, backup, moved, link)],
            )
        except SlackApiError as exc:  # the newer card decides it; the older keeps buttons bound to its version
            log.warning("could not mark the earlier card of %s: %s", approval.id, exc.response.get("error"))


def _gone(approval: Approval, headline: str, backup: str, moved: MessageRef, link: str | None) -> dict[str, Any]:
    """The line an earlier card becomes. Rich text: the headline is drawn from the arguments, and nothing in it may
    read as hitl's own markup; the link is the only live element (the channel, when Slack gave no link)."""
    to: list[dict[str, Any]] = (
        [{"type": "link", "url": link, "text": "decide it on the newer card"}]
        if link is not None
        else [
            {"type": "text", "text": "decide it on the newer card in "},
            {"type": "channel", "channel_id": moved.channel},
        ]
    )
    return {
        "type": "rich_text",
        "block_id": f"hitl_handed_on_from:{approval.id}",
        "elements": [
            {
                "type": "rich_text_section",
                "elements": [
                    {"type": "emoji", "name": "arrow_right_hook"},
                    {"type": "text", "text": " "},
                    {"type": "text", "text": headline or approval.tool, "style": {"bold": True}},
                    {"type": "text", "text": f" was handed on to {backup[:40]}: "},
                    *to,
                ],
            }
        ],
    }
