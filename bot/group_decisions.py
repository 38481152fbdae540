"""Deciding a group card's members together: one click, one group decision of the engine's
(:mod:`hitl.engine.deciding.groups`), each member decided in its own atomic step.

The click carries the group's digest (:func:`hitl.engine.domain.grouping.group_digest`): the id, version and action
hash of every pending member the card showed. A group that no longer has that digest (a member decided, edited or
purged since the card was drawn) is refused whole and audited, and the card is drawn again. Otherwise each member
is decided at the version the digest named, so a member that moves while the others are being decided is refused
on its own (``stale_version``, audited by the core) and stays pending on the card, shown again.

The card's own checks come first (a tampered or changed group, a stranger: one refusal for all); then the engine
decides the members and the reply is worded from its outcome, member by member. Every member's decision is recorded
before the person hears anything about it. The click itself is answered at once
with an empty acknowledgement (a group can take longer than Slack's 3 s to record); what was decided is told after.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hitl.bot.context import BotContext
from hitl.bot.decisions import redraw, refusal_text
from hitl.bot.views.group_cards import still_needed
from hitl.engine.domain.decide import eligible
from hitl.engine.domain.group_outcome import GroupOutcome
from hitl.engine.domain.grouping import decidable_together, group_digest
from hitl.engine.domain.hashing import short_hash
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.own_confirmation import askers
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.requests import GroupDecideRequest, GroupMember
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["GroupReply", "decide_group", "group_members"]

log = logging.getLogger(__name__)
_WHY_NOT = {
    ErrorCode.STALE_VERSION: ":arrows_counterclockwise: {n} were not: they changed meanwhile (stale_version), and the "
    "card shows them again.",
    ErrorCode.HASH_MISMATCH: ":arrows_counterclockwise: {n} were not: they changed meanwhile (hash_mismatch), and the "
    "card shows them again.",
    ErrorCode.ALREADY_DECIDED: ":lock: {n} were not: someone else decided them meanwhile (already_decided).",
    ErrorCode.DUPLICATE_VOTE: ":ballot_box_with_check: {n} were not: you had voted on them already (duplicate_vote).",
    ErrorCode.EXPIRED: ":hourglass: {n} were not: they expired meanwhile (expired).",
}
"""Why some members of a group decision were refused, in the decider's words (``{n}``: how many)."""


@dataclass(frozen=True)
class GroupReply:
    """What a click on a group card did: the engine's outcome, member by member, or the card's own refusal."""

    outcome: GroupOutcome | None = None
    """Each member's outcome (None when the card refused the click before the engine was asked)."""
    refusal: str | None = None
    """Why nothing was decided (a changed group, a stranger), in the clicker's words; None otherwise."""

    def text(self) -> str:
        """What the person who decided is told: how many members their decision moved (approved, rejected), how
        many it only voted on (a quorum not met yet: still pending), and why any were refused."""
        if self.outcome is None:
            return self.refusal or ":warning: Nothing changed."
        out = self.outcome
        verb = "Approved" if out.kind is DecisionKind.APPROVE else "Rejected"
        moved, voted = out.decided, out.voted
        total = len(out.members)
        lines = [f":white_check_mark: {verb} {len(moved)} of {total}."] if moved or not voted else []
        if voted:  # recorded votes, not decisions: saying "Approved" here would tell the clicker something untrue
            lines.append(
                f":ballot_box_with_check: Voted on {len(voted)} of {total}, not approved yet: {still_needed(voted)}."
            )
        by_code: dict[ErrorCode, int] = {}
        for member in out.refused:
            code = member.code or ErrorCode.INVALID_INPUT
            by_code[code] = by_code.get(code, 0) + 1
        for code, count in sorted(by_code.items()):
            said = _WHY_NOT.get(code, f":warning: {{n}} were not ({code}).")
            lines.append(said.format(n=count))
        practice = sum(is_practice(a) for a in moved)
        if practice:
            lines.append(f":mortar_board: {practice} of them were practice requests: nothing ran for those.")
        return "\n".join(lines)


async def group_members(ctx: BotContext, leader: str) -> list[Approval] | None:
    """Every approval on the message ``leader`` names (its first member), as they now stand, in card order; None
    when ``leader`` is not the first member of any message."""
    ref = await ctx.store.messages.get(leader)
    if ref is None:
        return None
    ids = await ctx.store.messages.shown_on(ref)
    if not ids or min(ids) != leader:
        return None
    return await ctx.notifier.members(ids)


async def decide_group(
    ctx: BotContext, user_id: str, leader: str, digest: str, kind: DecisionKind, *, reason: str | None = None
) -> GroupReply:
    """Decide every pending member of ``leader``'s group as ``user_id``, bound to ``digest``."""
    members = await group_members(ctx, leader)
    if members is None:
        await ctx.lifecycle.refused(leader, user_id, "tampered_button", f"group {kind} naming no group card")
        return GroupReply(refusal=":warning: This button is not valid (it may have been altered). Nothing changed.")
    pending = [a for a in members if a.is_open]
    if group_digest(pending) != digest:
        detail = f"group {kind} on digest {short_hash(digest)}, which is no longer the group's"
        await ctx.lifecycle.refused(leader, user_id, ErrorCode.STALE_VERSION, detail)
        redraw(ctx, members[0])  # queued, not only looked for: the change may have queued none (no Slack there)
        return GroupReply(
            refusal=":arrows_counterclockwise: This group changed since its card was drawn (a request in it was "
            "decided or changed). Nothing was decided: use the updated card."
        )
    if not decidable_together(pending):
        await ctx.lifecycle.refused(leader, user_id, ErrorCode.INVALID_INPUT, f"group {kind} on one-by-one requests")
        return GroupReply(refusal=":no_entry: These requests are decided one by one: open each from the card.")
    reviewer = await ctx.reviewers.reviewer(user_id)
    if not eligible(
        pending[0], reviewer, ctx.clock.now()
    ):  # the members share who may decide them: one refusal says it for all
        code = ErrorCode.SELF_APPROVAL if reviewer.id in askers(pending[0]) else ErrorCode.NOT_ELIGIBLE
        await ctx.lifecycle.refused(leader, user_id, code, f"group {kind} of {len(pending)}")
        return GroupReply(refusal=refusal_text(EngineError("", code=code), pending[0]))
    request = GroupDecideRequest(
        tuple(GroupMember(a.id, a.version, a.action_hash) for a in pending),
        reviewer,
        kind,
        reason=reason,
        via=f"slack:group:{short_hash(digest)}",
    )
    out = await ctx.lifecycle.decide_group(request, resume="queue", seen={a.id: a for a in pending})
    now = ctx.clock.now()
    for member in out.members:
        if member.recorded and member.approval is not None:
            ctx.metrics.decided(member.approval, kind, now)
    if out.refused:
        log.info("a group %s by %s left %d of %d members refused", kind, user_id, len(out.refused), len(pending))
    return GroupReply(out)
