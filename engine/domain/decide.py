"""Pure decision rules: what a decide or expire does to an approval, or why it is refused.

The SQLite store runs these functions inside one transaction; the Redis store runs the same checks,
in the same order, in one Lua script (``engine/storage/lua/decide.lua``). The conformance suite keeps
the two in agreement. Check order (the first failing check names the refusal):

0. the store applies it after the command's ``answer_by`` (a wall-clock instant) -> ``too_late``
1. status is not pending -> ``expired`` if it expired, else ``already_decided`` naming the winner
2. ``now >= expires_at`` -> ``expired``
3. expected version differs -> ``stale_version``
4. expected action hash differs -> ``hash_mismatch``
5. reviewer, or anyone a delegation in force ties them to (:attr:`Reviewer.people`), is the requester, or (on a tier
   but ``self``) the person the agent acts for -> ``self_approval`` (separation of duties)
6. reviewer lacks the required role, or a ``self`` approval is not the reviewer's own -> ``not_eligible``
7. reviewer, or anyone tied to them, already voted, or a vote was cast acting for one of them -> ``duplicate_vote``
8. trust on a non-trustable approval -> ``not_trustable``
9. approve, trust or modify of an approval that asks more than a click (:attr:`Approval.asks_attention`) by a
   command whose surface did not check what it asks (``attended``) -> ``confirmation_mismatch``
10. modify on a multi-approver approval without a replacement -> ``invalid_input``
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from hitl.engine.domain.confirmation import APPROVING
from hitl.engine.domain.consequences import Consequence
from hitl.engine.domain.models import Approval, ApprovalKind, Decision, DecisionKind, Reviewer, Status, Tier
from hitl.engine.domain.own_confirmation import SELF_BASIS, askers
from hitl.engine.domain.presentation import NO_VIEW, digest_of
from hitl.engine.domain.records import TrustGrant
from hitl.engine.domain.states import check_transition
from hitl.engine.errors import DecisionRefused, EngineError, ErrorCode, StaleVersion

__all__ = [
    "NO_VIEW",
    "RESUME_JOB",
    "DecideCommand",
    "acting_for",
    "apply_decision",
    "apply_expiry",
    "closed_refusal",
    "decided_detail",
    "eligible",
    "may_vote",
    "refusal",
    "refusal_message",
    "run_to_resume",
    "trust_granted",
    "trust_note",
]

RESUME_JOB = "resume"
"""The durable job that continues a workflow run once an approval it waits on is decided (or its owner died)."""


class DecideCommand(BaseModel):
    """Everything one decide call needs; the store applies it atomically."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    approval_id: str
    reviewer: Reviewer
    kind: DecisionKind
    expected_version: int
    expected_hash: str
    reason: str | None = None
    args: dict[str, Any] | None = None
    supersede_with: str | None = None
    """For a modify whose new arguments raised the tier: the id of the replacing approval."""
    consequence: Consequence | None = None
    """For a modify that approves: the tool's consequence computed for the edited arguments, kept on its decision
    (:attr:`~hitl.engine.domain.models.Approval.will_happen`)."""
    via: str = "api"
    jobs: tuple[str, ...] = ()
    """Kinds of durable job queued with the decision, in its atomic step, each with ``{"approval_id": ...}`` as
    payload (the card update): a recorded decision never lacks its follow-up, and costs no second round trip.
    Nothing is queued when the decision is refused."""
    run_jobs: tuple[str, ...] = ()
    """Kinds of durable job queued in the same atomic step only when the decision leaves a workflow run's approval
    decided (:func:`run_to_resume`), with ``{"session_id": ..., "approval_id": ...}`` as payload (the run's resume).
    The resume rides the decision as the card update does, so no crash can leave a decided approval whose run
    never continues, and nothing has to scan paused runs to find one."""
    note: str = ""
    """Appended to the decision's audit entry (a modify's changes, field by field: before -> after)."""
    answer_by: float | None = None
    """A wall-clock instant (seconds since the epoch, the store's own clock) after which the store refuses the
    decision as ``too_late``. A surface that must answer within a deadline (Slack: 3 s) sets it, so a decision it
    gave up waiting for, and told the person was not recorded, can never land later."""
    view: dict[str, Any] | None = None
    """The canonical view the person decided on (:meth:`Presentation.canonical`), kept in the decision's audit entry
    with its digest; None when none was shown (the entry says so)."""
    attended: bool = False
    """Whether the surface checked what approving this approval takes besides a click (the typed values, the
    reason: :func:`~hitl.engine.domain.confirmation.confirmation_problem`) before this step. An approving decision on
    an approval that asks it is refused unless so (a plain click on a card never approves it)."""
    trust_until: float | None = None
    """For a trust: when the grant it makes ends. A trust that leaves the approval approved writes its grant
    (:func:`trust_granted`) in the decision's own atomic step, so no crash leaves a trusted approval without its
    grant, or a grant without its decision."""


def decided_detail(cmd: DecideCommand, updated: Approval) -> str:
    """The ``decided`` entry's detail: the kind, the channel, the new state, "no view shown" when the decider named
    no view (the entry keeps the view otherwise), and an edit's changes. The Redis script writes the same."""
    seen = "" if cmd.view is not None else f"; {NO_VIEW}"
    on_behalf = updated.decisions[-1].acting_for if updated.decisions else None
    acting = f"; acting for {on_behalf} (delegation)" if on_behalf else ""
    basis = f"; {SELF_BASIS}" if updated.tier is Tier.SELF else ""
    return f"{cmd.kind} via {cmd.via} -> {updated.status}{seen}{acting}{basis}" + (f"; {cmd.note}" if cmd.note else "")


def run_to_resume(approval: Approval) -> str | None:
    """The run a recorded decision continues: the approval's session, when it belongs to a workflow step (its
    metadata names the step) and the decision left it decided (no longer pending); otherwise None."""
    if approval.status is Status.PENDING or not approval.metadata.get("step"):
        return None
    return approval.session_id


def trust_granted(approval: Approval, cmd: DecideCommand) -> TrustGrant | None:
    """The grant a recorded decision writes with it: a Trust that left ``approval`` approved trusts its tool for its
    requester, in its session, until ``cmd.trust_until``. Only an action's: a practice approval's Trust grants
    nothing (it is that reviewer's miss); a Trust that was one vote of several, or that came without a deadline,
    grants nothing."""
    if cmd.kind is not DecisionKind.TRUST or cmd.trust_until is None or approval.status is not Status.APPROVED:
        return None
    if approval.kind is not ApprovalKind.ACTION:  # a practice copy, a spot check, a review: nothing runs by it
        return None
    return TrustGrant(
        session_id=approval.session_id,
        requester=approval.requester,
        tool=approval.tool,
        granted_by=cmd.reviewer.id,
        until=cmd.trust_until,
    )


def trust_note(grant: TrustGrant) -> str:
    """What a decision's audit entry adds when it granted trust (the Redis script writes the same words)."""
    return f"trusts {grant.tool} for {grant.requester} in session {grant.session_id}"


def eligible(approval: Approval, reviewer: Reviewer, now: float | None = None) -> bool:
    """In the required role (any role when none is required), or, once the approval is handed on by ``now``, in its
    backup role; and not the requester. Without ``now`` a backup reviewer is not counted. A ``self`` approval is
    the person's it acts for, and theirs alone: no role, and no delegation, lets anyone else decide it."""
    if reviewer.id in askers(approval):
        return False
    if approval.tier is Tier.SELF:
        return approval.on_behalf_of is not None and reviewer.id == approval.on_behalf_of
    if approval.required_role is None:
        return bool(reviewer.roles)
    if approval.required_role in reviewer.roles:
        return True
    return now is not None and approval.handed_on(now) and approval.backup_role in reviewer.roles


def may_vote(approval: Approval, reviewer: Reviewer, now: float) -> bool:
    """Whether ``reviewer`` may still cast a vote on ``approval`` at ``now``: eligible, not one person with its
    requester, and neither they nor anyone a delegation ties them to voted (what a list of their work shows)."""
    people = reviewer.people
    if any(asker in people for asker in askers(approval)) or not eligible(approval, reviewer, now):
        return False
    return not any(voter in people for d in approval.decisions for voter in d.voters)


def acting_for(approval: Approval, reviewer: Reviewer, now: float | None = None) -> str | None:
    """The delegator whose role makes ``reviewer`` eligible for ``approval``, when none of their own does (their
    own role wins); None when they decide in their own right."""
    delegated = dict(reviewer.delegated)
    if not delegated or approval.tier is Tier.SELF:
        return None
    own = reviewer.roles - delegated.keys()
    wanted = [approval.required_role] if approval.required_role is not None else sorted(reviewer.roles)
    if now is not None and approval.handed_on(now) and approval.backup_role is not None:
        wanted.append(approval.backup_role)
    if approval.required_role is None and own:
        return None
    if any(role in own for role in wanted):
        return None
    return next((delegated[role] for role in wanted if role in delegated), None)


def refusal_message(code: ErrorCode, approval: Approval, reviewer_id: str) -> str:
    """Words for a refusal, aimed at the person who tried."""
    winner = _winner(approval)
    match code:
        case ErrorCode.ALREADY_DECIDED:
            return f"{approval.id} was already decided by {winner} (now {approval.status}); nothing changed"
        case ErrorCode.EXPIRED:
            return f"{approval.id} expired; ask the requester to propose the action again"
        case ErrorCode.STALE_VERSION:
            return (
                f"{approval.id} changed since you loaded it (now version {approval.version}); reload and decide again"
            )
        case ErrorCode.HASH_MISMATCH:
            return f"the action of {approval.id} differs from the one you reviewed; reload it before deciding"
        case ErrorCode.SELF_APPROVAL if reviewer_id == approval.on_behalf_of:
            return (
                f"the agent acts for {reviewer_id} in {approval.id}, so another reviewer decides it (separation of "
                "duties)"
            )
        case ErrorCode.SELF_APPROVAL if reviewer_id != approval.requester:
            return (
                f"{approval.requester} requested {approval.id}, and a delegation ties {reviewer_id} to them: neither "
                "decides it (separation of duties)"
            )
        case ErrorCode.SELF_APPROVAL:
            return f"{reviewer_id} requested {approval.id} and cannot decide it (separation of duties)"
        case ErrorCode.NOT_ELIGIBLE if approval.tier is Tier.SELF:
            return (
                f"{approval.id} is not yours: only {approval.on_behalf_of or 'the person the agent acts for'}, for "
                "whom the agent acts, confirms it; nothing changed (your attempt is in the audit trail)"
            )
        case ErrorCode.NOT_ELIGIBLE:
            role = approval.required_role or "any reviewer role"
            return f"{reviewer_id} is not a reviewer for {approval.id}: it needs {role}"
        case ErrorCode.DUPLICATE_VOTE:
            if any(d.reviewer == reviewer_id for d in approval.decisions):
                return f"{reviewer_id} already voted on {approval.id}; it needs {approval.quorum} distinct approvers"
            return (
                f"a delegation ties {reviewer_id} to someone who already voted on {approval.id}: together they are "
                f"one vote; it needs {approval.quorum} distinct approvers"
            )
        case ErrorCode.INVALID_INPUT:
            return f"{approval.id} needs {approval.quorum} approvers; a modification must start a new approval"
        case ErrorCode.NOT_TRUSTABLE:
            return f"{approval.tool} cannot be trusted for a session; approve it once instead"
        case ErrorCode.CONFIRMATION_MISMATCH:
            return (
                f"approving {approval.id} takes more than a click: type what it asks to confirm"
                + (" and say why" if approval.approve_reason_required else "")
                + " (Approve opens the form; the CLI and the API take --confirm / confirm)"
            )
        case ErrorCode.TOO_LATE:
            return f"the store took too long to record your decision on {approval.id}; nothing changed, decide again"
        case _:
            return f"{approval.id}: decision refused ({code})"


def _winner(approval: Approval) -> str:
    if approval.status is Status.EXPIRED:
        return "expiry"
    return approval.decisions[-1].reviewer if approval.decisions else "the system"


def refusal(code: ErrorCode, approval: Approval, reviewer_id: str) -> EngineError:
    """The refusal for ``code`` (both stores raise exactly this; Redis learns the code from its script). A refusal
    that a delegation in force caused (the reviewer is one person with the requester, or with an earlier voter) says
    so in its context (``by_delegation``).

    A stale version is a :class:`StaleVersion`, as it is everywhere a compare-and-swap loses; every other
    refusal is a :class:`DecisionRefused`.
    """
    cls = StaleVersion if code is ErrorCode.STALE_VERSION else DecisionRefused
    tied = (code is ErrorCode.SELF_APPROVAL and reviewer_id not in askers(approval)) or (
        code is ErrorCode.DUPLICATE_VOTE and all(d.reviewer != reviewer_id for d in approval.decisions)
    )
    return cls(
        refusal_message(code, approval, reviewer_id),
        code=code,
        approval_id=approval.id,
        status=str(approval.status),
        version=approval.version,
        winner=_winner(approval) if code is ErrorCode.ALREADY_DECIDED else None,
        **({"by_delegation": True} if tied else {}),
    )


def closed_refusal(approval: Approval, reviewer_id: str) -> EngineError | None:
    """The refusal every decision on ``approval`` meets once it is no longer pending: ``expired``, or
    ``already_decided`` naming who decided it; None while it is pending."""
    if approval.status is Status.PENDING:
        return None
    code = ErrorCode.EXPIRED if approval.status is Status.EXPIRED else ErrorCode.ALREADY_DECIDED
    return refusal(code, approval, reviewer_id)


def check_decision(approval: Approval, cmd: DecideCommand, now: float, *, wall: float | None = None) -> None:
    """Raise the first refusal that applies (order in the module docstring); ``wall`` is the store's wall clock,
    read inside its atomic step, for ``cmd.answer_by``."""
    if cmd.answer_by is not None and wall is not None and wall > cmd.answer_by:
        raise refusal(ErrorCode.TOO_LATE, approval, cmd.reviewer.id)
    closed = closed_refusal(approval, cmd.reviewer.id)
    if closed is not None:
        raise closed
    if now >= approval.expires_at:
        raise refusal(ErrorCode.EXPIRED, approval, cmd.reviewer.id)
    if cmd.expected_version != approval.version:
        raise refusal(ErrorCode.STALE_VERSION, approval, cmd.reviewer.id)
    if cmd.expected_hash != approval.action_hash:
        raise refusal(ErrorCode.HASH_MISMATCH, approval, cmd.reviewer.id)
    people = cmd.reviewer.people
    if any(asker in people for asker in askers(approval)):
        raise refusal(ErrorCode.SELF_APPROVAL, approval, cmd.reviewer.id)
    if not eligible(approval, cmd.reviewer, now):
        raise refusal(ErrorCode.NOT_ELIGIBLE, approval, cmd.reviewer.id)
    if any(voter in people for d in approval.decisions for voter in d.voters):
        raise refusal(ErrorCode.DUPLICATE_VOTE, approval, cmd.reviewer.id)
    if cmd.kind is DecisionKind.TRUST and not approval.trustable:
        raise refusal(ErrorCode.NOT_TRUSTABLE, approval, cmd.reviewer.id)
    if cmd.kind in APPROVING and approval.asks_attention and not cmd.attended:
        raise refusal(ErrorCode.CONFIRMATION_MISMATCH, approval, cmd.reviewer.id)
    if cmd.kind is DecisionKind.MODIFY and approval.quorum > 1 and not cmd.supersede_with:
        # Earlier votes were cast on other arguments; a modified multi-approver action starts a new approval.
        raise refusal(ErrorCode.INVALID_INPUT, approval, cmd.reviewer.id)


def apply_decision(approval: Approval, cmd: DecideCommand, now: float, *, wall: float | None = None) -> Approval:
    """Return the approval after ``cmd``, or raise :class:`DecisionRefused` leaving it unchanged."""
    check_decision(approval, cmd, now, wall=wall)
    decision = Decision(
        reviewer=cmd.reviewer.id,
        kind=cmd.kind,
        at=now,
        version=approval.version,
        reason=cmd.reason,
        args=cmd.args,
        via=cmd.via,
        acting_for=acting_for(approval, cmd.reviewer, now),
        consequence=cmd.consequence if cmd.kind is DecisionKind.MODIFY and not cmd.supersede_with else None,
        view_digest=digest_of(cmd.view) if cmd.view is not None else None,
    )
    decisions = (*approval.decisions, decision)
    changes: dict[str, Any] = {"decisions": decisions, "version": approval.version + 1, "updated_at": now}
    target = _target_status(approval, cmd, decisions)
    if target is not Status.PENDING:
        check_transition(approval.status, target, approval_id=approval.id)
        changes["status"] = target
    if cmd.kind in (DecisionKind.REJECT, DecisionKind.FEEDBACK):
        changes["reason"] = cmd.reason
    if cmd.kind is DecisionKind.MODIFY and target is Status.APPROVED:
        changes["approved_args"] = cmd.args
    if target is Status.SUPERSEDED:
        changes["superseded_by"] = cmd.supersede_with
    return approval.model_copy(update=changes)


def _target_status(approval: Approval, cmd: DecideCommand, decisions: tuple[Decision, ...]) -> Status:
    if cmd.kind in (DecisionKind.REJECT, DecisionKind.FEEDBACK):
        return Status.REJECTED
    if cmd.kind is DecisionKind.MODIFY and cmd.supersede_with:
        return Status.SUPERSEDED
    if cmd.kind is DecisionKind.MODIFY:
        return Status.APPROVED
    approvals = sum(1 for d in decisions if d.kind in (DecisionKind.APPROVE, DecisionKind.TRUST))
    return Status.APPROVED if approvals >= approval.quorum else Status.PENDING


def apply_expiry(approval: Approval, now: float) -> Approval | None:
    """The expired approval, or None when it is not due (or no longer pending)."""
    if approval.status is not Status.PENDING or now < approval.expires_at:
        return None
    return approval.model_copy(
        update={
            "status": Status.EXPIRED,
            "version": approval.version + 1,
            "reason": "expired without a decision",
            "updated_at": now,
        }
    )
