"""What every body the HTTP API reads or writes stands on (the request, answer and query-string bases, the field
types), its errors, and the approvals' bodies and answers: the pydantic models the OpenAPI document is generated from.
A request body with a wrong type or an unknown field is refused (422) before any handler runs. Each other area's
models are in a module of their own (``execution_models``, ``group_decision_models``, ``run_models``,
``oversight_models``, ``trust_models``, ``delegation_models``, ``receipt_models``, ``authzen_models``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.edits import edit_of
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.models import Approval, DecisionKind, Status, Tier
from hitl.engine.domain.presentation import Presentation
from hitl.engine.domain.ranking import PendingOrder
from hitl.engine.domain.records import AuditEntry

__all__ = [
    "ApprovalList",
    "ApprovalView",
    "Args",
    "AuditList",
    "AuditQuery",
    "AuditView",
    "DecisionRequest",
    "DecisionView",
    "ErrorBody",
    "ErrorDetail",
    "FieldChange",
    "FieldError",
    "Id",
    "ListQuery",
    "QueryModel",
    "RequestModel",
    "ResponseModel",
    "Text",
    "TokenView",
    "WaitQuery",
    "iso",
]

Args = dict[str, Any]
Text = Annotated[str, Field(max_length=4000)]
Id = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


def iso(ts: float) -> str:
    """An epoch time as an ISO 8601 UTC timestamp."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Every model here is built (its validator and serializer) when first used, not at import (defer_build): a `hitl`
# command prints a few of them and `hitl serve` answers with those a request asks for, while building all of them
# cost every process that imports the API (every `hitl serve`, every `hitl` command) about 20 ms of CPU.
class RequestModel(BaseModel):
    """The base of every request body: strict types, and an unknown field is refused (422)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class ResponseModel(BaseModel):
    """The base of every answer and of what it holds."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class QueryModel(BaseModel):
    """The base of every query string: an unknown parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")


# -- errors -------------------------------------------------------------------------------------------------
class FieldError(ResponseModel):
    """One invalid field: where (``args.amount``) and why."""

    field: str
    message: str


class ErrorDetail(ResponseModel):
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


class ErrorBody(ResponseModel):
    """Every error the API answers."""

    error: ErrorDetail


# -- approvals ----------------------------------------------------------------------------------------------
class DecisionView(ResponseModel):
    """One recorded decision on an approval."""

    reviewer: str
    decision: DecisionKind
    at: str
    reason: str | None
    via: str
    acting_for: str | None = None
    """The delegator whose role the reviewer decided with (a delegation), when not one of their own."""


class AuditView(ResponseModel):
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


class AuditList(ResponseModel):
    """Audit entries."""

    entries: list[AuditView]
    """Oldest first."""


class FieldChange(ResponseModel):
    """One field a reviewer's edit changed (null: absent)."""

    before: Any
    after: Any


class ApprovalView(ResponseModel):
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


class ApprovalList(ResponseModel):
    """A page of approvals."""

    items: list[ApprovalView]
    cursor: str | None
    """Pass as ``cursor`` for the next page; null at the end. A page may hold fewer than ``limit`` items when
    filters drop some: follow the cursor until it is null."""
    waiting: int | None = None
    """In a list of pending approvals, to a token that may decide: how many pending approvals its reviewer may
    decide (their roles, not their own requests), counted up to 1,000."""


class DecisionRequest(RequestModel):
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


# -- query strings --------------------------------------------------------------------------------------------
class ListQuery(QueryModel):
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


class WaitQuery(QueryModel):
    """How long to wait for an approval to change."""

    after_version: int = Field(ge=0)
    timeout: float = Field(default=30.0, ge=0, le=60)
    """Seconds to hold the request open (at most 60): the answer comes as soon as the version passes
    ``after_version``, else the approval as it is when the time is up."""


class AuditQuery(QueryModel):
    """How many audit entries to read."""

    limit: int = Field(default=200, ge=1, le=5000)
    """The newest entries to return (oldest first)."""


# -- the caller ---------------------------------------------------------------------------------------------
class TokenView(ResponseModel):
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
