"""What one decision on a group of approvals did, member by member: the value every surface words its answer from
(Slack's reply and group card, the API's answer, the CLI's lines and exit code)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.errors import ErrorCode

__all__ = ["STALE_CODES", "GroupOutcome", "MemberOutcome", "MemberResult"]

STALE_CODES = frozenset({ErrorCode.STALE_VERSION, ErrorCode.HASH_MISMATCH})
"""Refusals that mean the member changed since it was shown: look again, then decide it."""


class MemberResult(StrEnum):
    """What a group decision did to one member."""

    DECIDED = "decided"
    """Recorded and the member left pending: approved or rejected."""
    VOTED = "voted"
    """Recorded as one approver's vote; the member still needs more (a quorum of two or more) and stays pending."""
    STALE = "stale"
    """Refused: the member changed since it was shown (another version or action hash); nothing recorded."""
    REFUSED = "refused"
    """Refused for another reason (``code`` says which: not eligible, already decided, a typed value to give...)."""


@dataclass(frozen=True)
class MemberOutcome:
    """One member's outcome."""

    approval_id: str
    result: MemberResult
    approval: Approval | None = None
    """The member after its decision; for a refusal, as it was read (None when it could not be read)."""
    code: ErrorCode | None = None
    """Why it was refused (None when recorded)."""
    message: str | None = None
    """The refusal's message, saying what to do next (None when recorded)."""

    @property
    def recorded(self) -> bool:
        """Whether the decision (or vote) on this member was recorded."""
        return self.result in (MemberResult.DECIDED, MemberResult.VOTED)

    @property
    def still_needs(self) -> int:
        """For a vote: how many more approvers the member needs (0 otherwise)."""
        if self.result is not MemberResult.VOTED or self.approval is None:
            return 0
        return max(self.approval.quorum - len(self.approval.approvers), 1)


@dataclass(frozen=True)
class GroupOutcome:
    """Every member's outcome, in the order the request named them."""

    kind: DecisionKind
    members: tuple[MemberOutcome, ...]

    def having(self, result: MemberResult) -> list[MemberOutcome]:
        """The members with ``result``, in order."""
        return [m for m in self.members if m.result is result]

    @property
    def decided(self) -> list[Approval]:
        """The members the decision moved (approved or rejected), as they stand after it."""
        return [m.approval for m in self.having(MemberResult.DECIDED) if m.approval is not None]

    @property
    def voted(self) -> list[Approval]:
        """The members that got a vote and still wait for more approvers, as they stand after it."""
        return [m.approval for m in self.having(MemberResult.VOTED) if m.approval is not None]

    @property
    def refused(self) -> list[MemberOutcome]:
        """The members nothing was recorded on (stale ones included), in order."""
        return [m for m in self.members if not m.recorded]

    @property
    def complete(self) -> bool:
        """Whether the decision was recorded on every member."""
        return all(m.recorded for m in self.members)
