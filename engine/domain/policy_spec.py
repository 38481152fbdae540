"""The ``policy:`` section of ``hitl.yaml``, validated by pydantic (``extra="forbid"`` everywhere)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from hitl.engine.domain.arg_schema import declared_schema
from hitl.engine.domain.caps import CapsSpec
from hitl.engine.domain.consequences import ConsequenceLimits
from hitl.engine.domain.durations import Seconds, share_or_duration, share_reached_at
from hitl.engine.domain.failover import FailsOver
from hitl.engine.domain.models import Approval, Tier
from hitl.engine.domain.policy_source import SourceSpec
from hitl.engine.domain.presentation import Presentation, present
from hitl.engine.domain.summary import check_summary, currencies, render_summary

__all__ = [
    "AttentionSpec",
    "HandOnSpec",
    "OffHoursSpec",
    "PolicySpec",
    "RollingSumSpec",
    "RuleSpec",
    "TierSpec",
    "ToolPolicySpec",
    "VelocitySpec",
]

_ARGUMENT = r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class AttentionSpec(_Spec):
    """What approving takes besides a click, declared on a tier, a rule or a tool: the approvals it covers can be
    approved only by a reviewer who types the values named in ``confirm`` (each compared exactly with the value that
    runs), and, with ``approve_reason: required``, says why. Neither can be trusted for a session, decided in a
    batch or on a group card."""

    confirm: list[Annotated[str, Field(pattern=_ARGUMENT)]] = Field(default_factory=list, max_length=5)
    """Arguments the reviewer types to approve (``[amount]``); an argument the call does not carry is skipped."""
    approve_reason: Literal["required", "optional"] = "optional"
    """``required``: approving needs a reason (``reason_required`` is the rejection's)."""


class HandOnSpec(_Spec):
    """Hand an unanswered approval on before it expires: after ``hand_on_after`` (a share of its timeout, ``50%``,
    or a duration, ``30m``) the ``backup_role`` may decide it too; the original reviewers still may, and votes cast
    still count. At the deadline it expires as ever (never approved)."""

    hand_on_after: Annotated[float | str, BeforeValidator(share_or_duration)] | None = None
    backup_role: str | None = Field(default=None, max_length=64)

    @model_validator(mode="after")
    def _both(self) -> HandOnSpec:
        if (self.hand_on_after is None) != (self.backup_role is None):
            raise ValueError("hand_on_after and backup_role go together: when to hand on, and to whom")
        return self

    def hand_on_at(self, created_at: float, timeout: float) -> float | None:
        """When an approval created at ``created_at`` with ``timeout`` is handed on (None: never, or not before it
        expires)."""
        return share_reached_at(self.hand_on_after, created_at, timeout)


class TierSpec(AttentionSpec, FailsOver):
    """What approving any approval of one tier takes (``policy.tiers.escalate: {confirm: [amount]}``)."""


class ToolPolicySpec(AttentionSpec, HandOnSpec, FailsOver):
    """Policy for one tool (with what approving it takes: ``confirm``, ``approve_reason``)."""

    tier: Tier = Tier.APPROVE
    role: str | None = None
    """Role whose members may approve; None means any configured reviewer."""
    quorum: int = Field(default=1, ge=1, le=20)
    trustable: bool = True
    """Whether a reviewer may trust this tool for the rest of a session."""
    timeout: Seconds = 3600.0
    fallback: str = "cancel"
    reason_required: bool = False
    """Whether a rejection must carry a reason."""
    reason: str | None = Field(default=None, max_length=300)
    """Why this tool needs a person, as a reviewer reads it on the card (default: who must approve it)."""
    summary: str | None = Field(default=None, max_length=500)
    """The card's headline: a template over the call's arguments only (``Refund {{ args.amount | money }} to
    {{ args.customer_id }}``), with the filters ``money``, ``date`` and ``list``."""

    @property
    def trust_reaches(self) -> bool:
        """Whether a reviewer's Trust may ever cover this tool: ``trustable`` and not at tier ``self``. A ``self``
        tool's calls are the person's it acts for to confirm; a Trust given on one asked as ``approve`` (nobody was
        known) would otherwise let a later call run without the person it has, for Trust applies before the tier."""
        return self.trustable and self.tier is not Tier.SELF

    @field_validator("summary")
    @classmethod
    def _summary_compiles(cls, v: str | None) -> str | None:
        if v is not None and (problem := check_summary(v)) is not None:
            raise ValueError(f"summary is not a valid template: {problem}")
        return v

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    """JSON Schema of the tool's arguments, snapshotted on approvals whose asker gave none (the ask API, the
    HTTP API); edits are validated against it."""

    consequence: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")
    """The tool author's ``module:function`` that computes what a call will do, shown to reviewers as "What will
    happen" (:mod:`~hitl.engine.domain.consequences`); imported when the file is loaded."""
    consequence_limits: ConsequenceLimits = Field(default_factory=ConsequenceLimits)
    """Its bounds: ``timeout`` (2s), ``max_bytes`` (4096), ``max_rows`` (50), ``workers`` (4), ``env``."""
    consequence_check: bool = False
    """Compute the consequence again just before an approved call runs; when it differs from the one its deciders
    saw, nothing runs and the approval is asked again (:mod:`~hitl.engine.domain.drift`)."""
    consequence_ignore: tuple[Annotated[str, Field(min_length=1, max_length=100)], ...] = Field(
        default=(), max_length=20
    )
    """Names the check leaves out of the comparison: a part (``summary``, ``changes``, ``table``, ``diff``), a
    change's label or a table's column, at the top of the consequence only (:mod:`~hitl.engine.domain.drift`)."""

    @model_validator(mode="after")
    def _check_needs_consequence(self) -> ToolPolicySpec:
        if (self.consequence_check or self.consequence_ignore) and self.consequence is None:
            raise ValueError(
                "consequence_check and consequence_ignore need the tool's consequence: name its module:function in "
                "consequence:"
            )
        if self.consequence_ignore and not self.consequence_check:
            raise ValueError("consequence_ignore names what the check leaves out: set consequence_check: true too")
        return self

    @field_validator("schema_")
    @classmethod
    def _json_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if v is None else declared_schema(v)

    @field_validator("fallback")
    @classmethod
    def _tool_fallback(cls, v: str) -> str:
        # "continue" after an unanswered tool approval would run an unapproved effect.
        if v != "cancel":
            raise ValueError("tool approvals can only fall back to 'cancel'; 'continue' is for review gates")
        return v


_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class OffHoursSpec(_Spec):
    """Outside working hours in a timezone: ``start`` to ``end`` (may wrap midnight), plus weekends."""

    timezone: str = "UTC"
    start: str = "18:00"
    end: str = "08:00"
    weekends: bool = True

    @field_validator("start", "end")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _HHMM.match(v):
            raise ValueError(f"{v!r} is not a time; write HH:MM in 24-hour form")
        return v


class VelocitySpec(_Spec):
    """More than ``max`` requests for one subject within ``window``."""

    subject: str
    """Expression naming the subject, e.g. ``args.customer_id``."""
    max: int = Field(ge=0)
    window: Seconds


class RollingSumSpec(_Spec):
    """The sum of ``value`` for one subject within ``window`` (this request included) exceeds ``threshold``."""

    subject: str
    value: str
    """Expression for the amount, e.g. ``args.amount``."""
    threshold: float
    window: Seconds


class RuleSpec(AttentionSpec, HandOnSpec, FailsOver):
    """A dynamic rule. It can only raise the tier, never lower it; when it fires, what it asks of approving
    (``confirm``, ``approve_reason``) is added to the approval's."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    tools: list[str] = Field(default_factory=lambda: ["*"])
    when: str | None = None
    """Sandboxed Jinja2 expression over ``tool`` and ``args``, e.g. ``args.amount > 500``."""
    off_hours: OffHoursSpec | None = None
    velocity: VelocitySpec | None = None
    rolling_sum: RollingSumSpec | None = None
    source: SourceSpec | None = None
    """A policy engine gives the outcome (``{cedar: {policies, schema}}`` or ``{opa: {url, path, timeout}}``); its
    ``tier`` is what a failed answer asks at least (default ``approve``)."""
    tier: Tier
    role: str | None = None
    quorum: int | None = Field(default=None, ge=1, le=20)
    reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _source_tier(cls, data: Any) -> Any:
        # An engine gives the tier; the rule's own is only the floor of a failed answer.
        if isinstance(data, dict) and data.get("source") is not None and "tier" not in data:
            return {**data, "tier": Tier.APPROVE.value}
        return data

    @model_validator(mode="after")
    def _one_trigger(self) -> RuleSpec:
        triggers = [
            t for t in (self.when, self.off_hours, self.velocity, self.rolling_sum, self.source) if t is not None
        ]
        if len(triggers) != 1:
            raise ValueError("a rule needs exactly one of: when, off_hours, velocity, rolling_sum, source")
        if self.source is not None and not self.tier.needs_human:
            raise ValueError("a source rule's tier is what a failed answer asks: approve or escalate, never lower")
        return self


class PolicySpec(_Spec):
    """Which actions need a human, and which human."""

    default_tier: Tier = Tier.APPROVE
    """Tier of a configured tool that sets none. Unknown tools always need approval."""
    default_timeout: Seconds = 3600.0
    allowed_tools: list[str] = Field(default_factory=list)
    """Tools that run without asking; ``*`` for all, ``!tool`` to always ask for one (never trusted)."""
    denied_tools: list[str] = Field(default_factory=list)
    """Tools that never run. ``*`` denies unknown tools outright instead of asking about them."""
    tools: dict[str, ToolPolicySpec] = Field(default_factory=dict)
    rules: list[RuleSpec] = Field(default_factory=list)
    tiers: dict[Tier, TierSpec] = Field(default_factory=dict)
    """What approving takes per tier: ``{escalate: {confirm: [amount], approve_reason: required}}``."""
    trust_ttl: Seconds = 3600.0
    caps: CapsSpec = Field(default_factory=CapsSpec)
    """How many approvals a requester, a session or a tool may ask for in a window (each off unless set)."""

    def summarize(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """``tool``'s ``summary:`` sentence for ``args``, its money in the declared schema's currencies (None
        without a template, or when it fails on them)."""
        declared = self.tools.get(tool)
        if declared is None or not declared.summary:
            return None
        return render_summary(declared.summary, args, currencies=currencies(declared.schema_))

    def declared_schema(self, tool: str) -> dict[str, Any] | None:
        """``tool``'s argument schema as declared here (None: none): the only source of a card's labels."""
        declared = self.tools.get(tool)
        return declared.schema_ if declared is not None else None

    def present(self, a: Approval) -> Presentation:
        """The one view of ``a`` (:mod:`~hitl.engine.domain.presentation`) in this policy's words: its summary
        sentences and its declared schemas' labels. Every surface draws it; a decision naming a view is checked
        against it."""
        return present(a, summarize=self.summarize, declared=self.declared_schema(a.tool))

    @model_validator(mode="after")
    def _unique_rules(self) -> PolicySpec:
        names = [r.name for r in self.rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(dupes)}")
        return self
