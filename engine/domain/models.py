"""Domain values: actions, approvals, decisions, reviewers. All frozen; time is epoch seconds (UTC)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.consequences import Consequence
from hitl.engine.domain.drift import ConsequenceDrift

__all__ = [
    "RESERVED_PREFIXES",
    "Approval",
    "ApprovalKind",
    "Decision",
    "DecisionKind",
    "Reviewer",
    "Status",
    "Tier",
    "asker_text",
    "kind_of_older",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ApprovalKind(StrEnum):
    """What an approval asks a person, stored with it: code reads this, never an id, a tool name or metadata."""

    ACTION = "action"
    """A proposed call of a tool: it runs once approved (the only kind a Trust can grant anything for)."""
    PRACTICE = "practice"
    """A practice approval: a copy of a real approval with a planted defect; nothing ever runs it."""
    SPOT_CHECK = "spot_check"
    """An action that ran without a person, put to reviewers after the fact; nothing runs it."""
    DOUBT = "doubt"
    """Whether an effect whose outcome was lost happened (asked after a crash): Mark done, Run again or Stop."""
    GATE = "gate"
    """A workflow's review gate: go on, stop, or send the previous step feedback."""
    REVIEW = "review"
    """A quality loop's human review of a draft."""


RESERVED_PREFIXES = ("gate:", "review:", "doubt:", "spot:", "practice:")
"""Tool-name prefixes hitl's own approvals use: a caller's tool may not start with one, so no proposed action can
look like (or be mistaken for) one of them."""


def kind_of_older(data: dict[str, Any]) -> ApprovalKind:
    """The kind of an approval an older hitl stored, before kinds were a field: the only place the old markers
    (metadata ``kind``, a tool-name prefix) are read. The stores' migrations write the field with it, and the Redis
    store reads a document it has not migrated yet through it."""
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    marked = metadata.get("kind") if isinstance(metadata, dict) else None
    if marked in ("practice", "spot_check"):
        return ApprovalKind(marked)
    tool = str(data.get("tool", ""))
    for kind in (ApprovalKind.DOUBT, ApprovalKind.GATE, ApprovalKind.REVIEW):
        if tool.startswith(f"{kind}:"):
            return kind
    return ApprovalKind.ACTION


class Tier(StrEnum):
    """How much human attention an action needs, lowest first."""

    AUTO = "auto"
    NOTIFY = "notify"
    SELF = "self"
    """The person the agent acts for confirms their own request (no reviewer): only ``hitl.yaml`` sets it, and
    a call with no such person known from a trusted source is asked of the tool's role as ``approve``."""
    APPROVE = "approve"
    ESCALATE = "escalate"

    @property
    def rank(self) -> int:
        """The tier's order, from auto (0) to escalate: a stricter tier ranks higher."""
        return _TIER_RANK[self]

    @property
    def needs_human(self) -> bool:
        """True for tiers a person must decide (self and above): the call waits on an approval."""
        return self.rank >= _TIER_RANK[Tier.SELF]


_TIER_RANK = {Tier.AUTO: 0, Tier.NOTIFY: 1, Tier.SELF: 2, Tier.APPROVE: 3, Tier.ESCALATE: 4}


class Status(StrEnum):
    """Lifecycle of an approval; moves are governed by ``hitl.engine.domain.states``."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"


class DecisionKind(StrEnum):
    """What a reviewer decided."""

    APPROVE = "approve"
    REJECT = "reject"
    MODIFY = "modify"
    TRUST = "trust"
    FEEDBACK = "feedback"


class Reviewer(_Frozen):
    """A person deciding, with the roles the caller resolved for them from configuration."""

    id: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    """Slack user id (``U...``) or another stable identity (``cli:alice``); no control characters."""
    roles: frozenset[str] = frozenset()
    """Roles this reviewer holds now: their own and any a delegation in force hands them."""
    delegated: tuple[tuple[str, str], ...] = ()
    """``(role, delegator)`` for each role they hold only through a delegation, and whom it came from."""
    linked: frozenset[str] = frozenset()
    """Everyone a delegation in force ties them to, either way: one person with them for separation of duties and
    one vote toward a quorum."""

    def in_own_right(self) -> Reviewer:
        """This reviewer with only the roles they hold themselves (what they may delegate): none handed to them."""
        if not self.delegated and not self.linked:
            return self
        handed = {role for role, _ in self.delegated}
        return self.model_copy(update={"roles": self.roles - handed, "delegated": (), "linked": frozenset()})

    @property
    def people(self) -> frozenset[str]:
        """The ids that count as this one person now: their own and :attr:`linked`."""
        return self.linked | {self.id}


class Decision(_Frozen):
    """One recorded vote or verdict on an approval."""

    reviewer: str
    kind: DecisionKind
    at: float
    version: int
    """The approval version the reviewer saw when deciding."""
    reason: str | None = None
    args: dict[str, Any] | None = None
    """Edited arguments, for ``modify``."""
    via: str = "api"
    """Channel the decision came through: slack, cli, api."""
    acting_for: str | None = None
    """The delegator whose role the reviewer decided with (a delegation in force), when not one of their own: the
    vote counts as that person's too, also after the delegation ends."""
    consequence: Consequence | None = None
    """For a ``modify`` that approves: the tool's consequence computed for the edited arguments (what will run);
    None when the tool declares none."""
    view_digest: str | None = None
    """The digest of the view the reviewer decided on (the one the decision's audit entry keeps, as
    ``view_digest``); None when no view was shown. A receipt names it per approver (``view_digests``)."""

    @property
    def voters(self) -> tuple[str, ...]:
        """Whose vote this decision is: the reviewer's, and the delegator's they acted for."""
        return (self.reviewer,) if self.acting_for is None else (self.reviewer, self.acting_for)


def asker_text(framework: object, agent: object, session_id: str) -> str | None:
    """How every surface says who asked: ``<framework>[ agent <name>], session <id>`` (None for no framework)."""
    if not framework:
        return None
    return f"{framework}{f' agent {agent}' if agent else ''}, session {session_id}"


class Approval(_Frozen):
    """A proposed action waiting for (or past) human review.

    The static part (tool, args, hash, tier, role, quorum, requester, expiry) is fixed at creation;
    ``status``, ``version`` and ``decisions`` change only through the state machine.
    """

    id: str
    session_id: str
    dedupe_key: str
    tool: str
    args: dict[str, Any]
    action_hash: str
    tier: Tier
    kind: ApprovalKind = ApprovalKind.ACTION
    """What it asks (an action, a practice copy, a spot check, a question about an effect in doubt, a review)."""
    rule: str
    """Name of the rule that set the tier."""
    reasons: tuple[str, ...] = ()
    why: tuple[str, ...] = ()
    summary: str | None = None
    """The tool's ``summary:`` sentence for these arguments (untrusted like them: shown escaped)."""
    """Why a person must decide, in a reviewer's words (the card shows these; ``reasons`` name the rules)."""
    """Every rule that fired, in words a reviewer understands."""
    required_role: str | None = None
    quorum: int = Field(default=1, ge=1)
    ratio: float | None = None
    """How far over its threshold the action is (the fired rule's amount divided by its threshold; None: no rule
    compares an amount): the queue ranks by it after the tier (:mod:`~hitl.engine.domain.ranking`)."""
    requester: str
    on_behalf_of: str | None = None
    """The person the agent acts for (a reviewer id from a trusted source: a token's ``acts_for``, the MCP client's
    mapped principal; never from the agent's own fields), None when nobody is known. On a ``self`` approval they
    alone decide it; on any other tier they are one of its askers and never decide it (separation of duties)."""
    created_at: float
    expires_at: float
    version: int = 1
    status: Status = Status.PENDING
    decisions: tuple[Decision, ...] = ()
    evidence: str = ""
    """Redacted, bounded, untrusted text. Never rendered as markup."""
    preview: str = ""
    """What the call would do, as its caller rendered it: untrusted, the caller's, never the tool's consequence."""
    consequence: Consequence | None = None
    """What the call will do, as its tool's own consequence computed it before anyone was asked (None: the tool
    declares none); untrusted output, shown as "What will happen"."""
    drift: ConsequenceDrift | None = None
    """Why it asks again: the approval it supersedes drifted (its consequence, computed again just before it would
    have run, differed from the one its deciders saw); None for an approval asked the first time."""
    trustable: bool = False
    reason_required: bool = False
    """Whether a rejection must carry a reason (from the policy when the approval was created)."""
    confirm: tuple[str, ...] = ()
    """Arguments a reviewer types to approve, each compared exactly with the value that runs (the policy's
    ``confirm:``): a click alone does not approve it, nor a Trust, a batch or a group decision."""
    approve_reason_required: bool = False
    """Whether approving needs a reason (the policy's ``approve_reason: required``)."""
    backup_role: str | None = None
    """The role an unanswered approval is handed on to at ``hand_on_at`` (the policy's ``backup_role``): from then
    its members may decide it too, beside the required role's."""
    hand_on_at: float | None = None
    """When it is handed on to ``backup_role`` (None: never)."""
    fallback: str = "cancel"
    approved_args: dict[str, Any] | None = None
    """Arguments to execute with once approved (differs from ``args`` after a modify)."""
    superseded_by: str | None = None
    supersedes: str | None = None
    """The approval this one replaced: a reviewer's edit of it needed other approvers (its card then links here)."""
    reason: str | None = None
    """Rejection reason, expiry note or failure text."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Where the approval came from: ``framework``, ``agent``, ``call_id``, ``modifiable``, run and step ids."""
    args_schema: dict[str, Any] | None = None
    """JSON Schema of the arguments, snapshotted when the approval was created: edited arguments are validated
    against exactly this, on every surface, and the Modify form is built from it."""
    updated_at: float = 0.0

    @property
    def approvers(self) -> tuple[str, ...]:
        """Distinct reviewers who voted to approve (approve, trust or modify)."""
        kinds = {DecisionKind.APPROVE, DecisionKind.TRUST, DecisionKind.MODIFY}
        return tuple(d.reviewer for d in self.decisions if d.kind in kinds)

    @property
    def execute_args(self) -> dict[str, Any]:
        """The arguments the effect runs with."""
        return self.approved_args if self.approved_args is not None else self.args

    @property
    def will_happen(self) -> Consequence | None:
        """The consequence of what will run: for an approval a Modify approved, the one computed for its edited
        arguments; else the one computed when it was asked (None: the tool declares none)."""
        if self.approved_args is not None:
            edited = next((d for d in reversed(self.decisions) if d.kind is DecisionKind.MODIFY), None)
            if edited is not None and edited.consequence is not None:
                return edited.consequence
        return self.consequence

    @property
    def asked_by(self) -> str | None:
        """Which framework and agent asked, in which session (None for workflow runs and plain proposals)."""
        return asker_text(self.metadata.get("framework"), self.metadata.get("agent"), self.session_id)

    @property
    def modifiable(self) -> bool:
        """Whether a reviewer may edit the arguments: not a batch, and the asker can run edited arguments (an
        adapter whose framework cannot apply them creates its approvals with ``modifiable: false``)."""
        return "batch" not in self.metadata and self.metadata.get("modifiable", True) is not False

    def handed_on(self, now: float) -> bool:
        """Whether it has been handed on to its backup role by ``now``."""
        return self.backup_role is not None and self.hand_on_at is not None and now >= self.hand_on_at

    @property
    def asks_attention(self) -> bool:
        """Whether approving takes more than a click: typing values (``confirm``) or a reason."""
        return bool(self.confirm) or self.approve_reason_required

    @property
    def is_open(self) -> bool:
        """True while the approval waits for a decision."""
        return self.status is Status.PENDING
