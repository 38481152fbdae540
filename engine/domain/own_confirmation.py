"""Tier ``self``: the person the agent acts for confirms their own request.

Only ``hitl.yaml`` puts a tool at ``self`` (a tool's tier or a rule's); the policy only ever raises a tier, and no
surface lets an agent name one, so an agent cannot lower a call to it. Who that person is comes from the surface
that authenticated them (:attr:`~hitl.engine.domain.requests.ProposeRequest.on_behalf_of`), never from the call.
A ``self`` call with nobody so known is asked of the tool's role as ``approve``: a yes nobody can give is never
assumed. A ``self`` decision is recorded with ``basis self``; it is that one person's confirmation, so it never
counts toward a quorum, separation of duties or Trust (the approval has a quorum of one and cannot be trusted).
No Trust ever covers a ``self`` tool, not even one given on a call asked as ``approve`` for want of a person: Trust
applies before the tier, so it would let the next call, one with a person, run without them
(:attr:`~hitl.engine.domain.policy_spec.ToolPolicySpec.trust_reaches`).
"""

from __future__ import annotations

import dataclasses

from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.policy import Fired, Verdict

__all__ = ["NO_PERSON", "SELF_BASIS", "askers", "confirms_own", "settled"]

NO_PERSON = "self_without_person"
"""The rule a ``self`` call is recorded under when nobody it acts for is known, so it is asked as ``approve``."""
SELF_BASIS = "basis self"
"""What the audit entry of a decision on a ``self`` approval says (the Redis script writes the same words)."""


def settled(verdict: Verdict, person: str | None, *, quorum: int = 1) -> Verdict:
    """``verdict`` as it is asked: a ``self`` verdict with ``person`` (the one who confirms) needs that person alone
    (one vote, no Trust, no hand-on to a backup role); without a person it becomes ``approve`` for the tool's
    role and ``quorum`` (the tool's: a tier below approve was given one vote), and says why. Any other verdict is
    returned as it is."""
    if verdict.tier is not Tier.SELF:
        return verdict
    if person is None:
        fired = Fired(
            NO_PERSON,
            Tier.APPROVE,
            f"{verdict.tool} is at tier self but no person it acts for is known from a trusted source: asked as "
            "approve (fail closed)",
            "Nobody known asked for this, so a reviewer decides.",
        )
        return dataclasses.replace(
            verdict, tier=Tier.APPROVE, rule=NO_PERSON, fired=(*verdict.fired, fired), quorum=max(quorum, 1)
        )
    return dataclasses.replace(verdict, quorum=1, trustable=False, hand_on=None, required_role=None)


def askers(approval: Approval) -> tuple[str, ...]:
    """Who asked for ``approval``, for separation of duties: its requester (the agent's identity) and, on any tier
    but ``self``, the person the agent acts for. Neither decides it as a reviewer: a rule that raised a person's
    own call to ``approve`` asked someone else to look (on ``self`` that person alone decides)."""
    if approval.on_behalf_of is None or approval.tier is Tier.SELF:
        return (approval.requester,)
    return (approval.requester, approval.on_behalf_of)


def confirms_own(approval: Approval) -> bool:
    """Whether ``approval`` is a ``self`` one: only :attr:`Approval.on_behalf_of` decides it."""
    return approval.tier is Tier.SELF and approval.on_behalf_of is not None
