"""Every body the HTTP API reads or writes, as pydantic models: the OpenAPI document is generated from them, and
a request body with a wrong type or an unknown field is refused (422) before any handler runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitl.engine.domain.delegation import Delegation
from hitl.engine.domain.durations import parse_duration
from hitl.engine.domain.edits import edit_of
from hitl.engine.domain.group_outcome import GroupOutcome, MemberResult
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.ranking import PendingOrder
from hitl.engine.domain.records import AuditEntry, TrustGrant

__all__ = [
    "API_GROUP_MEMBERS",
    "AllowedReceiptRequest",
    "AllowedReceiptView",
    "ApprovalList",
    "ApprovalView",
    "AuditList",
    "AuditQuery",
    "AuditView",
    "ClaimRequest",
    "ClaimView",
    "DecisionRequest",
    "DecisionView",
    "DelegationEnd",
    "DelegationList",
    "DelegationRequest",
    "DelegationView",
    "ErrorBody",
    "ErrorDetail",
    "ExecutionClaim",
    "FieldChange",
    "FieldError",
    "GroupDecisionRequest",
    "GroupDecisionView",
    "GroupMemberRequest",
    "HaltList",
    "HaltRequest",
    "HaltView",
    "ListQuery",
    "MemberOutcomeView",
    "OutcomeRequest",
    "ProposalRequest",
    "ProposalView",
    "ReceiptClaimRequest",
    "ReceiptClaimView",
    "RedeemRequest",
    "Redeemed",
    "ResumeRequest",
    "ReviewerFiguresList",
    "ReviewerFiguresView",
    "ReviewersQuery",
    "RunStartRequest",
    "RunView",
    "TokenView",
    "TrustList",
    "TrustQuery",
    "TrustRevoked",
    "TrustView",
    "UnhaltRequest",
    "Unhalted",
    "WaitQuery",
    "iso",
]

Args = dict[str, Any]
Text = Annotated[str, Field(max_length=4000)]
Id = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


API_GROUP_MEMBERS = 100
"""The most approvals one ``POST /decisions`` names: any longer list is refused with 422 before it could pass the
body's size limit (``api.max_body``, 64 KiB), whatever its ids."""


def iso(ts: float) -> str:
    """An epoch time as an ISO 8601 UTC timestamp."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Every model here is built (its validator and serializer) when first used, not at import (defer_build): a `hitl`
# command prints a few of them and `hitl serve` answers with those a request asks for, while building all of them
# cost every process that imports the API (every `hitl serve`, every `hitl` command) about 20 ms of CPU.
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


# -- errors -------------------------------------------------------------------------------------------------
class FieldError(_Out):
    """One invalid field: where (``args.amount``) and why."""

    field: str
    message: str


class ErrorDetail(_Out):
    """What went wrong: a stable code, a message that says what to do next, and whether a retry can help."""

    code: str
    """Stable, machine-readable (``stale_version``, ``not_eligible``, ``invalid_input``...)."""
    message: str
    """What happened and what to do next, for a person."""
    retryable: bool
    """Whether the same request may succeed later unchanged."""
    version: int | None = None
    """On a 409: the approval's current version."""
    status: str | None = None
    """On a 409: the approval's current status."""
    fields: list[FieldError] | None = None
    """On a 422: every invalid field."""


class ErrorBody(_Out):
    """Every error the API answers."""

    error: ErrorDetail


# -- approvals ----------------------------------------------------------------------------------------------
class DecisionView(_Out):
    """One recorded decision on an approval."""

    reviewer: str
    decision: DecisionKind
    at: str
    reason: str | None
    via: str
    acting_for: str | None = None
    """The delegator whose role the reviewer decided with (a delegation), when not one of their own."""


class AuditView(_Out):
    """One audit entry."""

    at: str
    actor: str
    event: str
    approval_id: str | None
    version: int | None
    outcome: str
    detail: str
    view_digest: str | None = None
    """A decision's: the digest of the view its decider was shown (null: none was shown)."""
    view: dict[str, Any] | None = None
    """A decision's: that view, as recorded (an approval's ``view`` as it stood)."""

    @classmethod
    def of(cls, e: AuditEntry) -> AuditView:
        """The entry as the API shows it (its time as ISO 8601)."""
        return cls.model_validate({**e.model_dump(include=set(cls.model_fields)), "at": iso(e.at)})


class AuditList(_Out):
    """Audit entries."""

    entries: list[AuditView]
    """Oldest first."""


class FieldChange(_Out):
    """One field a reviewer's edit changed (null: absent)."""

    before: Any
    after: Any


class ApprovalView(_Out):
    """An approval as ``hitl show --json`` prints it (plus, from the API, the caller's view and the audit trail)."""

    id: str
    status: Status
    tool: str
    args: Args
    execute_args: Args
    action_hash: str
    """SHA-256 of the canonical JSON of the tool and the proposed ``args``: what a decision is bound to."""
    execute_hash: str
    """The same hash of ``execute_args`` (differs after a Modify): what an execution claim is bound to."""
    version: int
    tier: Tier
    required_role: str | None
    quorum: int
    ratio: float | None = None
    """How far over its threshold the fired rule found the action (its amount over the threshold): the queue's
    second sort key, after the tier."""
    ranked: str | None = None
    """In a list of pending approvals in rank order: in a few words why it ranks there ("escalated · 10× its
    rule's limit · 12 min left")."""
    approvals: int
    decisions: list[DecisionView]
    expires_at: str
    created_at: str
    session_id: str
    requester: str
    on_behalf_of: str | None = None
    """At tier ``self``: the person the agent acts for, who alone confirms it (with their own identity)."""
    asked_by: dict[str, str] | None
    modifiable: bool
    trustable: bool
    confirm: list[str] = []
    """Arguments a reviewer must type to approve (``DecisionRequest.confirm``): a click alone does not approve it."""
    approve_reason_required: bool = False
    """Whether approving needs a ``reason``."""
    rule: str
    reasons: list[str]
    """Every rule that fired, in the policy's words."""
    why: list[str]
    """Why a person must decide, in a reviewer's words (what the card shows)."""
    summary: str | None = None
    """The tool's ``summary:`` sentence for these arguments (untrusted like them)."""
    changes: dict[str, FieldChange] | None = None
    """What a reviewer's Modify changed, field by field (on the approval it approved, superseded or replaced)."""
    evidence: str
    """Untrusted text from the requester: show it escaped, apart from the controls."""
    preview: str = ""
    """What the call would do, as its caller rendered it: the caller's own (untrusted), never the tool's
    ``consequence``."""
    consequence: dict[str, Any] | None = None
    """"What will happen", as the tool's own consequence computed it before anyone was asked (null: the tool
    declares none): ``outcome`` (``shown``, ``busy``, ``timed_out``, ``failed``), ``summary``, ``changes`` (each
    ``label``, ``before``, ``after``), ``table`` (rows) and ``rows_cut``, ``diff``, ``why`` (when not shown) and
    ``sha256``, the digest of its RFC 8785 JSON the ``view`` carries. Untrusted output: show it escaped, apart
    from your own labels."""
    drift: dict[str, Any] | None = None
    """Why it asks again (null: asked the first time): the approved one's consequence, computed again just before
    it would have run, differed from the one its deciders saw. ``of`` (that approval's id), ``count`` (drifts in a
    row; at 3 it expires as ``drifted``), ``notice`` (hitl's words) and ``seen`` (what was approved, in the form
    of ``consequence``); ``consequence`` is what will happen now."""
    reason: str | None
    superseded_by: str | None
    args_schema: dict[str, Any] | None
    """The tool's JSON Schema snapshot: edited arguments (modify) are validated against it."""
    can_decide: bool | None = None
    """From the API: whether the calling token may decide this approval now."""
    planted: dict[str, str] | None = None
    """Only in an admin's listing of practice approvals (``/practice``): the ``defect`` planted, what it ``says``,
    and the approval it is a copy ``of``."""
    practice: str | None = None
    """Only in the answer to the decision that ended a practice approval: that it was one, and
    whether its planted defect was caught."""
    audit: list[AuditView] | None = None
    """From ``GET /approvals/{id}``: the approval's audit trail, oldest first."""
    view: dict[str, Any] | None = None
    """The one view of the approval every surface draws (the Slack card, ``hitl show``, ...): its headline, the
    reasons, each argument as shown (typed, its look-alikes warned about), an edit's before and after, the
    outcome line. Plain data with no relative time, and the ``renderer`` that built it."""
    view_digest: str | None = None
    """SHA-256 of ``view``'s canonical JSON (sorted keys, no spaces): names exactly what was shown."""

    @classmethod
    def of(cls, a: Approval, view: Presentation) -> ApprovalView:
        """The approval as the API and ``hitl show --json`` show it: its own fields, what is worked out, and its
        one view (``view``: drawn with the served ``hitl.yaml``, as every surface draws it, so its digest is the
        one a card's buttons carry)."""
        canonical, digest = view.recorded()
        return cls.model_validate(
            {
                "view": canonical,
                "view_digest": digest,
                **a.model_dump(include=set(cls.model_fields)),
                "execute_args": a.execute_args,
                "execute_hash": action_hash(a.tool, a.execute_args) if a.approved_args is not None else a.action_hash,
                "approvals": len(a.approvers),
                "decisions": [
                    DecisionView(
                        reviewer=d.reviewer,
                        decision=d.kind,
                        at=iso(d.at),
                        reason=d.reason,
                        via=d.via,
                        acting_for=d.acting_for,
                    )
                    for d in a.decisions
                ],
                "expires_at": iso(a.expires_at),
                "created_at": iso(a.created_at),
                "asked_by": {k: str(a.metadata[k]) for k in ("framework", "agent", "call_id") if k in a.metadata}
                or None,
                "modifiable": a.modifiable,
                "consequence": {**a.will_happen.canonical(), "sha256": a.will_happen.digest()}
                if a.will_happen
                else None,
                "drift": {
                    "of": a.drift.of,
                    "count": a.drift.count,
                    "notice": a.drift.notice,
                    "seen": {**a.drift.seen.canonical(), "sha256": a.drift.seen.digest()},
                }
                if a.drift
                else None,
                "changes": {k: FieldChange(before=b, after=v) for k, (b, v) in edit_of(a).items()} or None,
            }
        )


class ApprovalList(_Out):
    """A page of approvals."""

    items: list[ApprovalView]
    cursor: str | None
    """Pass as ``cursor`` for the next page; null at the end. A page may hold fewer than ``limit`` items when
    filters drop some: follow the cursor until it is null."""
    waiting: int | None = None
    """In a list of pending approvals, to a token that may decide: how many pending approvals its reviewer may
    decide (their roles, not their own requests), counted up to 1,000."""


class DecisionRequest(_In):
    """One decision, bound to what the reviewer saw: the approval's version and its full action hash."""

    decision: DecisionKind
    expected_version: int = Field(ge=1)
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    reason: Text | None = None
    args: Args | None = None
    """The edit, for ``modify``: a JSON Merge Patch onto the current arguments (a field left out keeps its value,
    one set to null is removed), validated against the approval's schema."""
    replace_args: bool = False
    """``args`` replaces the arguments whole instead of patching them (every field must be given)."""
    answer: Text | None = None
    """The answer to a question (``ask_person``), with ``decision`` ``approve`` or ``modify`` and no ``args``:
    recorded as an edit that adds it, bounded by the question's ``max_chars``."""
    view_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """The ``view_digest`` of the approval view the reviewer was shown: the decision's audit entry keeps that view
    (``hitl audit show``), and a view that is no longer the approval's is refused as stale (409). Left out, the
    entry records that no view was shown."""
    confirm: dict[Annotated[str, Field(max_length=64)], str | int | float] | None = Field(default=None, max_length=5)
    """To approve an approval whose ``confirm`` names arguments: each one's value as the reviewer typed it, by name
    (a number compares as an exact decimal, text exactly after NFC). A wrong or missing one is refused with 422
    ``confirmation_mismatch``, audited. An approval with ``approve_reason_required`` needs ``reason`` too."""


class GroupMemberRequest(_In):
    """One approval of a group decision, as the reviewer saw it."""

    id: Id
    expected_version: int = Field(ge=1)
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class GroupDecisionRequest(_In):
    """One decision on several approvals, each bound to the version and full action hash the reviewer saw."""

    approvals: list[GroupMemberRequest] = Field(min_length=1, max_length=API_GROUP_MEMBERS)
    """The approvals in the order shown, each named once (at most :data:`API_GROUP_MEMBERS`)."""
    decision: Literal["approve", "reject"]
    reason: Text | None = None
    """Why, recorded on every member (a tool that requires a reason to reject refuses its members without one)."""


class MemberOutcomeView(_Out):
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


class GroupDecisionView(_Out):
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


# -- proposals and executions -------------------------------------------------------------------------------
class ProposalRequest(_In):
    """A proposed tool call, checked by the policy (and the tool's schema) before anything is stored."""

    session: Id
    tool: str = Field(min_length=1, max_length=128)
    args: Args
    idempotency_key: Id
    """The caller's id for this one call: asking again with the same key re-attaches to the same approval."""
    evidence: Text = ""
    agent: Annotated[str, Field(max_length=120)] | None = None
    args_schema: dict[str, Any] | None = None
    """The tool's JSON Schema (for a typed Modify form, and to validate edits)."""


class ProposalView(_Out):
    """The policy's verdict on a proposal: run now, denied, or pending a person's decision."""

    verdict: Literal["run", "deny", "pending"]
    """``run``: execute now with ``args``; ``deny``: do not (``message`` says why); ``pending``: wait."""
    args: Args
    """What to run (a reviewer's edit included), when ``verdict`` is ``run``."""
    message: str | None
    code: str | None
    approval: ApprovalView | None
    execution_key: str | None
    """Claim this before running an approved call (``POST /executions/{key}/claim``); null when no approval."""
    receipt: str | None = None
    """For ``run`` without an approval, of a tool whose receipts come ``always`` (``receipts:`` in hitl.yaml): the
    signed receipt (``basis`` ``policy`` or ``trust``) the protected system checks. Null otherwise."""


class ClaimRequest(_In):
    """A claim of an approved call's one execution, bound to the hash of what is about to run."""

    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The hash of exactly what is about to run: the approval's ``execute_hash``."""
    lease: float = Field(default=300.0, gt=0, le=86400)
    """Seconds the claim stays yours; a claim not finished in time is recovered as "in doubt", never re-run."""


class ClaimView(_Out):
    """Whether this caller holds the execution, and the arguments to run it with."""

    key: str
    acquired: bool
    args: Args
    """Run exactly these."""
    approval: ApprovalView
    receipt: str | None = None
    """The signed receipt for this execution (``receipts:`` in hitl.yaml): pass it to the protected system, which
    checks it (``hitl.receipts.verify``) and spends it once (``POST /receipts/redeem``). Null when none is issued."""


class ReceiptClaimRequest(_In):
    """Another process's claim of an approved execution with its receipt (``hitl serve`` holds the key)."""

    key: Annotated[str, Field(min_length=6, max_length=210, pattern=r"^call:[^\x00-\x1f\x7f]+$")]
    """The execution's key: ``call:`` and the approval's id."""
    action_hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The hash of exactly what is about to run: the approval's ``execute_hash``."""
    holder: Id
    """The claiming process's name: it renews the claim and records the outcome in the store under it."""
    lease: float = Field(default=300.0, gt=0, le=86400)
    retry_failed: bool = False
    """A failed attempt may be claimed again (a run driven again); otherwise it is final."""


class AllowedReceiptRequest(_In):
    """Another process's call that runs without a person, of a tool whose receipts come ``always``."""

    tool: str = Field(min_length=1, max_length=128)
    args: Args
    session: Id
    scope: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^[^\x00-\x1f\x7f]+$")]
    """The proposal's dedupe scope (the gate's ``framework:session:call id``)."""
    requester: Id | None = None
    """Whose call it is: with the ``claim`` scope, the requester the process asks for; otherwise the token's own
    identity (another is refused)."""


class AllowedReceiptView(_Out):
    """The receipt of a call that runs without a person, and why it may (hitl serve's own finding)."""

    receipt: str
    basis: Literal["policy", "trust"]


class ExecutionClaim(_Out):
    """An execution claim, as the store's ledger answered it."""

    key: str
    action_hash: str
    holder: str
    attempt: int
    state: str
    lease_until: float
    result: dict[str, Any] | None = None
    """The recorded outcome of an earlier attempt (``{"output": ...}`` or ``{"error": ...}``)."""
    acquired: bool
    """The holder now holds the claim and runs the effect."""
    recovered: bool
    """The claim was taken over from a holder that stopped: the effect is in doubt."""


class ReceiptClaimView(_Out):
    """The claim, and the receipt issued in its atomic step (null unless acquired for a new attempt)."""

    claim: ExecutionClaim
    receipt: str | None = None


class RedeemRequest(_In):
    """Spend a receipt: the protected system's one use of it."""

    receipt: str = Field(min_length=20, max_length=5_000, pattern=r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
    """The compact JWS as the agent passed it (three base64url parts; a receipt is under 2 kB). Bounded so that even
    a body of the longest JSON-escaped string stays under ``api.max_body``, and is refused by its schema (422)."""
    redemption: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None
    """The caller's id for this use: redeeming again under the same id (a retry after a timeout) answers 200 again;
    without one, every redeem after the first is refused."""


class Redeemed(_Out):
    """A receipt spent (or, under the same redemption id, spent before by this use): act on it."""

    jti: str
    sub: str
    tool: str
    first: bool
    """False when this redemption id spent it before (a retry): act as the first answer said."""
    claims: dict[str, Any]


class OutcomeRequest(_In):
    """How a claimed execution went."""

    ok: bool
    detail: Text = ""


# -- runs ---------------------------------------------------------------------------------------------------
class RunStartRequest(_In):
    """Start a workflow registered under ``api.workflows``."""

    workflow: str = Field(min_length=1, max_length=64)
    """A name under ``api.workflows`` in hitl.yaml (never a path)."""
    vars: dict[str, Any] = Field(default_factory=dict)
    session_id: Id | None = None


class ResumeRequest(_In):
    """Resume a run, optionally with new values for its variables."""

    vars: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the run's variables for the steps still to come."""
    force: bool = False


class RunView(_Out):
    """Where a run stands, with the approvals it waits on."""

    session_id: str
    status: str
    """completed, paused, rejected, cancelled, expired, failed (or running)."""
    workflow: str | None
    position: int | None
    approval: ApprovalView | None
    """The approval the run waits on, when paused (the first of ``waiting``)."""
    waiting: list[ApprovalView] = Field(default_factory=list)
    """Every approval the run waits on: steps that run at the same time (parallel branches, workers) may each wait
    on one, and a decision on any of them resumes the run."""
    reason: str | None = None


# -- query strings --------------------------------------------------------------------------------------------
class _Query(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListQuery(_Query):
    """Which approvals to list."""

    status: Status | Literal["any"] = Status.PENDING
    """``pending`` (the default: what reviewers work through, in ``order``), another status, or ``any``: newest
    first."""
    order: PendingOrder = "rank"
    """Of pending approvals: ``rank`` (the default: the most important first, by tier, then how far over its
    threshold, then time left) or ``age`` (oldest first: the default of earlier releases). A cursor continues its
    own order."""
    role: Annotated[str, Field(max_length=64)] | None = None
    tool: Annotated[str, Field(max_length=128)] | None = None
    session: Annotated[str, Field(max_length=200)] | None = None
    decidable: bool = False
    """Only those the calling token may decide now."""
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Annotated[str, Field(max_length=400)] | None = None


class WaitQuery(_Query):
    """How long to wait for an approval to change."""

    after_version: int = Field(ge=0)
    timeout: float = Field(default=30.0, ge=0, le=60)
    """Seconds to hold the request open (at most 60): the answer comes as soon as the version passes
    ``after_version``, else the approval as it is when the time is up."""


class AuditQuery(_Query):
    """How many audit entries to read."""

    limit: int = Field(default=200, ge=1, le=5000)
    """The newest entries to return (oldest first)."""


class HaltRequest(_In):
    """Halt one tool, or every tool (no ``tool``): nothing new of it runs until it is unhalted."""

    tool: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None
    reason: Text = ""


class UnhaltRequest(_In):
    """Lift the halt of one tool, or the one of every tool (no ``tool``)."""

    tool: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None


class HaltView(_Out):
    """A halt order in force (or just lifted)."""

    scope: str
    """The tool it halts, or ``*`` for every tool."""
    by: str
    reason: str
    at: str


class HaltList(_Out):
    """The halts in force."""

    halts: list[HaltView]


class Unhalted(_Out):
    """A lifted halt, and how many runs it had paused were queued to resume."""

    halt: HaltView
    resumed_runs: int


class TrustView(_Out):
    """A trust grant in force: ``tool`` runs without review for ``requester`` in ``session_id`` until ``until``."""

    session_id: str
    requester: str
    """The identity the grant covers (the requester of the approval a reviewer trusted)."""
    tool: str
    granted_by: str
    until: str

    @classmethod
    def of(cls, g: TrustGrant) -> TrustView:
        """The view of a stored grant."""
        return cls(
            session_id=g.session_id, requester=g.requester, tool=g.tool, granted_by=g.granted_by, until=iso(g.until)
        )


class TrustList(_Out):
    """The trust grants in force that the caller may see (those of tools it may decide; all for an admin)."""

    grants: list[TrustView]


class TrustQuery(_Query):
    """Which grants to end: ``tool`` in ``session``, every requester's or one ``requester``'s."""

    session: Annotated[str, Field(min_length=1, max_length=200)]
    tool: Annotated[str, Field(min_length=1, max_length=128)]
    requester: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class TrustRevoked(_Out):
    """How many grants a revocation ended."""

    revoked: int


class ReviewersQuery(_Query):
    """How far back the figures per reviewer go."""

    since: Annotated[str, Field(pattern=r"^[0-9]+[smhdw]$", max_length=12)] = "30d"
    """A duration like ``24h``, ``7d`` or ``30d``."""

    @field_validator("since")
    @classmethod
    def _a_duration(cls, value: str) -> str:
        # A ValueError is a 422 naming the parameter: zero, or further back than the figures could reach.
        if parse_duration(value) > 10 * 365 * 86400:
            raise ValueError("since goes back at most ten years (3650d)")
        return value

    @property
    def seconds(self) -> float:
        """``since`` in seconds."""
        return parse_duration(self.since)


class ReviewerFiguresView(_Out):
    """One reviewer's oversight figures over the period."""

    reviewer: str
    decisions: int
    corrections: int
    practice_caught: int
    practice_missed: int
    spot_checks: int
    spot_flags: int
    catch_rate: float | None
    audit_yield: float | None


class ReviewerFiguresList(_Out):
    """The oversight figures per reviewer since ``since`` (read from the newest 10,000 approvals)."""

    since: str
    reviewers: list[ReviewerFiguresView]


class DelegationRequest(_In):
    """Hand the caller's reviewer roles (or ``role``) to ``delegate`` until ``until``: a date (``2026-12-24``, to
    the end of that day), a date and time (``2026-12-24 17:00``), both read in ``tz``, or an ISO 8601 time with an
    offset. At most 30 days ahead (a later end, or one no date holds, is 422 ``invalid_input``)."""

    delegate: Id
    """A reviewer id ``hitl.yaml``'s ``roles`` list, or an active person of the Slack workspace; never the agent's
    identity (``requester``), an identity whose tokens lack ``decide``, or mention markup (422
    ``invalid_delegate``)."""
    until: Annotated[str, Field(min_length=10, max_length=40)]
    role: Id | None = None
    tz: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    """An IANA time zone (``Europe/Paris``) the date is read in; UTC when none."""


class DelegationEnd(_In):
    """Which delegation to end: ``id``, or (none) the one the caller gave."""

    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = None


class DelegationView(_Out):
    """A delegation: ``delegator`` hands ``role`` (null: all their roles) to ``delegate`` until ``until`` (UTC)."""

    id: str
    delegator: str
    delegate: str
    role: str | None
    given_at: str
    until: str
    via: str
    ended_at: str | None
    ended_by: str | None

    @classmethod
    def of(cls, d: Delegation) -> DelegationView:
        """The view of a stored delegation."""
        return cls(
            id=d.id,
            delegator=d.delegator,
            delegate=d.delegate,
            role=d.role,
            given_at=iso(d.given_at),
            until=iso(d.until),
            via=d.via,
            ended_at=iso(d.ended_at) if d.ended_at is not None else None,
            ended_by=d.ended_by,
        )


class DelegationList(_Out):
    """The delegations in force that concern the caller (every one, for an admin)."""

    delegations: list[DelegationView]


# -- the caller ---------------------------------------------------------------------------------------------
class TokenView(_Out):
    """Who a token acts as, and what it may do: what a client says before it acts (the CLI's first line on stderr)."""

    reviewer: str
    """The reviewer id the token acts as (``api.tokens[].reviewer``)."""
    token: str
    """The token's name (never its text)."""
    scopes: list[str]
    roles: list[str] | None
    """The roles it decides with, when narrowed to some of its reviewer's."""
    tools: list[str] | None
    """The tools it sees, when narrowed."""
    audience: str | None
    """For a ``redeem`` token: the protected system whose receipts it spends."""
