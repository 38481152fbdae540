"""Deciding a group of approvals: one person's one decision on several, each member decided on its own.

A :class:`~hitl.engine.domain.requests.GroupDecideRequest` names its members in the order shown, each with the
version and action hash the person saw. Every member is then decided as a single decision is, in its own atomic
store step (one step per member, not one for the group: a member's rules are its own) bound to that version and
hash, so its roles, quorum and separation of duties are checked, its decision or refusal is audited, and its card
and run are told, exactly as for a click on its own card. A member that moved since it was shown is refused on its
own (``stale``) while the others go through; a member that approving takes more than a click for (typed values, a
reason) is refused in a group approval: it is decided on its own.

Every member's outcome is recorded before the group's answer is made (:class:`~hitl.engine.domain.group_outcome.
GroupOutcome`), and every surface words its answer from that outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from hitl.engine.domain.group_outcome import STALE_CODES, GroupOutcome, MemberOutcome, MemberResult
from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest, GroupDecideRequest, GroupMember
from hitl.engine.errors import EngineError, ErrorCode

__all__ = ["AT_ONCE", "DecideMember", "ReadMember", "RefuseMember", "decide_group"]

AT_ONCE = 8
"""Members decided at the same time (each its own atomic step; the store orders them)."""

DecideMember = Callable[[DecideRequest, Approval], Awaitable[Approval]]
"""Records one member's decision (given the member as read) and returns it after; raises the coded refusal."""
ReadMember = Callable[[str], Awaitable[Approval]]
"""Reads a member by id; raises :class:`~hitl.engine.errors.NotFound` (also for one the caller may not see)."""
RefuseMember = Callable[[str, str, ErrorCode, str], Awaitable[None]]
"""Audits a refusal made before a member's atomic step: approval id, actor, code, detail."""


async def decide_group(
    request: GroupDecideRequest,
    *,
    read: ReadMember,
    decide: DecideMember,
    refused: RefuseMember,
    seen: Mapping[str, Approval] | None = None,
) -> GroupOutcome:
    """Decide every member of ``request``; returns each member's outcome, in the request's order, once every one is
    recorded or refused. ``seen``: members the caller already read (not read again; their atomic step still checks
    the version and hash shown)."""
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(member: GroupMember) -> MemberOutcome:
        async with gate:
            return await _member(request, member, read=read, decide=decide, refused=refused, seen=seen or {})

    outcomes = await asyncio.gather(*(one(m) for m in request.members))
    return GroupOutcome(request.kind, tuple(outcomes))


async def _member(
    request: GroupDecideRequest,
    member: GroupMember,
    *,
    read: ReadMember,
    decide: DecideMember,
    refused: RefuseMember,
    seen: Mapping[str, Approval],
) -> MemberOutcome:
    approval_id = member.approval_id
    try:
        a = seen.get(approval_id) or await read(approval_id)
    except EngineError as exc:
        return MemberOutcome(approval_id, MemberResult.REFUSED, None, exc.code, exc.message)
    if request.kind is DecisionKind.APPROVE and a.is_open and a.asks_attention:
        # What approving it takes (values typed as read, a reason of its own) cannot be given for a whole group.
        code = ErrorCode.CONFIRMATION_MISMATCH
        message = (
            f"{a.id} asks its reviewer to type values or give a reason to approve it, which a group approval cannot: "
            f"approve it on its own (its card, or hitl resume {a.id} --approve --confirm NAME=VALUE)"
        )
        await refused(a.id, request.reviewer_id, code, f"group {request.kind} via {request.via}: decided one by one")
        return MemberOutcome(a.id, MemberResult.REFUSED, a, code, message)
    single = DecideRequest(
        a.id,
        request.reviewer,
        request.kind,
        expected_version=member.expected_version,
        expected_hash=member.expected_hash,
        reason=request.reason,
        via=request.via,
    )
    try:
        done = await decide(single, a)
    except EngineError as exc:
        result = MemberResult.STALE if exc.code in STALE_CODES else MemberResult.REFUSED
        return MemberOutcome(a.id, result, a, exc.code, exc.message)
    return MemberOutcome(a.id, MemberResult.VOTED if done.is_open else MemberResult.DECIDED, done)
