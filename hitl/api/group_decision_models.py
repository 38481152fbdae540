"""The bodies and answers of ``POST /decisions``: one decision on several approvals, each member's outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from hitl.engine.domain.group_outcome import GroupOutcome, MemberResult
from hitl.engine.domain.models import DecisionKind

from .models import ApprovalView, Id, RequestModel, ResponseModel, Text

__all__ = ["API_GROUP_MEMBERS", "GroupDecisionRequest", "GroupDecisionView", "GroupMemberRequest", "MemberOutcomeView"]

API_GROUP_MEMBERS = 100
"""The most approvals one ``POST /decisions`` names: any longer list is refused with 422 before it could pass the
body's size limit (``api.max_body``, 64 KiB), whatever its ids."""


class GroupMemberRequest(RequestModel):
    """One approval of a group decision, as the reviewer saw it."""

    id: Id
    expected_version: int = Field(ge=1)
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class GroupDecisionRequest(RequestModel):
    """One decision on several approvals, each bound to the version and full action hash the reviewer saw."""

    approvals: list[GroupMemberRequest] = Field(min_length=1, max_length=API_GROUP_MEMBERS)
    """The approvals in the order shown, each named once (at most :data:`API_GROUP_MEMBERS`)."""
    decision: Literal["approve", "reject"]
    reason: Text | None = None
    """Why, recorded on every member (a tool that requires a reason to reject refuses its members without one)."""


class MemberOutcomeView(ResponseModel):
    """What a group decision did to one member."""

    id: str
    outcome: MemberResult
    """``decided`` (approved or rejected), ``voted`` (recorded, still needs more approvers), ``stale`` (it changed
    since you saw it: nothing recorded, look again) or ``refused`` (``code`` says why: nothing recorded)."""
    code: str | None
    """The refusal's error code, as a single decision would get it (``not_eligible``, ``self_approval``,
    ``confirmation_mismatch``, ``already_decided``, ``not_found``...); null when recorded."""
    message: str | None
    """What to do next about a refusal; null when recorded."""
    still_needs: int
    """For ``voted``: how many more approvers the member needs; 0 otherwise."""
    approval: ApprovalView | None
    """The member after the decision, or as it stands when refused; null when it does not exist for this token."""


class GroupDecisionView(ResponseModel):
    """Every member's outcome, in the order the request named them, once each is recorded or refused."""

    decision: Literal["approve", "reject"]
    digest: str
    """SHA-256 of the members as named (id, version, action hash, in order), as a Slack group card's buttons carry."""
    members: list[MemberOutcomeView]
    decided: int
    voted: int
    stale: int
    refused: int

    @classmethod
    def of(cls, outcome: GroupOutcome, digest: str, views: Sequence[ApprovalView | None]) -> GroupDecisionView:
        """``outcome`` as the API answers it and ``hitl resume ID ID ...`` prints it (``views``: each member's
        approval as the caller sees it, in order; None where there is none to show)."""
        members = [
            MemberOutcomeView(
                id=m.approval_id,
                outcome=m.result,
                code=str(m.code) if m.code is not None else None,
                message=m.message,
                still_needs=m.still_needs,
                approval=view,
            )
            for m, view in zip(outcome.members, views, strict=True)
        ]
        return cls(
            decision="approve" if outcome.kind is DecisionKind.APPROVE else "reject",
            digest=digest,
            members=members,
            decided=len(outcome.having(MemberResult.DECIDED)),
            voted=len(outcome.having(MemberResult.VOTED)),
            stale=len(outcome.having(MemberResult.STALE)),
            refused=len(outcome.having(MemberResult.REFUSED)),
        )
