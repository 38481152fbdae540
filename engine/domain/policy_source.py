"""A rule whose outcome an external policy engine gives (``policy.rules[].source``): Cedar policies beside
``hitl.yaml`` or OPA's Data API. Pure: the request an engine is asked, and how its answer maps to hitl's outcomes.

The mapping (documented in docs/pages/policy-engines.md)::

    Cedar: Allow                                  -> allow (the rule does not fire)
           Deny, no forbid matched                -> failed: a person decides (nothing permitted the call)
           Deny by a forbid (no @tier, or "deny") -> deny: the call never runs
           Deny by a forbid with @tier("approve") -> that tier, with @role("finance") and @quorum("2") if given
    Rego:  {"allow": true} or {"tier": "auto"}    -> allow
           {"tier": "deny"}                       -> deny
           {"tier": "approve", "role": .., "quorum": .., "rule": ..} -> that tier, role and quorum

Anything else (an error, a timeout, an answer the mapping cannot read) is a failure: the call asks a person at the
tool's tier, at least ``approve``. An answer never lowers a call: a rule only raises its tier.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hitl.engine.domain.models import Tier

__all__ = [
    "CedarSource",
    "ExternalAnswer",
    "OpaSource",
    "Outcome",
    "SourceSpec",
    "annotation_problems",
    "engine_request",
    "from_cedar",
    "from_rego",
    "outcome",
]

_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
_TIERS = {"deny", *(t.value for t in Tier)}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CedarSource(_Spec):
    """Cedar policies evaluated in-process: ``policies`` (files beside ``hitl.yaml``) and an optional ``schema``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    policies: list[Annotated[str, Field(min_length=1, max_length=300)]] = Field(min_length=1, max_length=20)
    schema_: str | None = Field(default=None, alias="schema", max_length=300)

    @field_validator("policies", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v


class OpaSource(_Spec):
    """OPA's Data API: ``POST {url}/v1/data/{path}`` with ``{"input": ...}``, answered within ``timeout`` seconds."""

    url: str = Field(pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$", max_length=300)
    path: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$", max_length=200)
    """The document's path below ``data``, slash-separated (``hitl/tools/decision``)."""
    timeout: float = Field(default=2.0, gt=0, le=30)


class SourceSpec(_Spec):
    """Where a rule's outcome comes from: exactly one of ``cedar`` and ``opa``."""

    cedar: CedarSource | None = None
    opa: OpaSource | None = None

    @model_validator(mode="after")
    def _one(self) -> SourceSpec:
        if (self.cedar is None) == (self.opa is None):
            raise ValueError("a source is exactly one of cedar: {policies, schema} and opa: {url, path, timeout}")
        return self

    @property
    def kind(self) -> Literal["cedar", "opa"]:
        """Which engine answers."""
        return "cedar" if self.cedar is not None else "opa"

    @property
    def name(self) -> str:
        """The policy as a reviewer may read it (an id, never its body): the Cedar files or the OPA path."""
        if self.cedar is not None:
            return "Cedar " + ", ".join(self.cedar.policies)
        assert self.opa is not None
        return f"OPA {self.opa.path}"


@dataclass(frozen=True)
class ExternalAnswer:
    """What an engine answered for one call, mapped: ``outcome`` allow, deny or tier (``tier``, ``role``,
    ``quorum``), or failed (``error`` says why, for the operator; reviewers read only the policy and rule ids)."""

    outcome: Literal["allow", "deny", "tier", "failed"]
    tier: Tier | None = None
    role: str | None = None
    quorum: int | None = None
    rule_id: str | None = None
    error: str = ""

    @classmethod
    def failed(cls, error: str) -> ExternalAnswer:
        """An answer that could not be had or read: the call asks a person (fail closed)."""
        return cls("failed", error=error[:300])

    def text(self) -> str:
        """The answer as ``hitl policy explain`` shows it."""
        if self.outcome == "failed":
            return f"failed ({self.error}): a person decides"
        parts = [self.outcome if self.outcome != "tier" else f"tier {self.tier}"]
        parts += [f"role {self.role}"] if self.role else []
        parts += [f"quorum {self.quorum}"] if self.quorum else []
        return ", ".join(parts) + (f" (rule {self.rule_id})" if self.rule_id else "")


def engine_request(
    tool: str, args: Mapping[str, Any], *, requester: str, session_id: str, sums: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """The request an engine is asked: principal = requester, action = tool, resource = the tool, context = the
    arguments, the session and the rolling sums hitl keeps for the rules' subjects (this call included)."""
    return {
        "principal": requester,
        "action": tool,
        "resource": tool,
        "context": {"args": dict(args), "session": session_id, "rolling": {k: dict(v) for k, v in sums.items()}},
    }


def _mapped(tier: object, role: object, quorum: object, rule_id: object, *, where: str) -> ExternalAnswer | str:
    """An answer from its fields, or what is wrong with them."""
    if not isinstance(tier, str) or tier not in _TIERS:
        return f"{where}: tier {tier!r} is none of {', '.join(sorted(_TIERS))}"
    if role is not None and (not isinstance(role, str) or not _ID.match(role)):
        return f"{where}: role must be a role name"
    if isinstance(quorum, str) and quorum.isascii() and quorum.isdigit():  # "²" is a digit int() cannot read
        quorum = int(quorum)
    if quorum is not None and (isinstance(quorum, bool) or not isinstance(quorum, int) or not 1 <= quorum <= 20):
        return f"{where}: quorum must be a whole number from 1 to 20"
    rid = rule_id if isinstance(rule_id, str) and _ID.match(rule_id) else None
    if tier == "deny":
        return ExternalAnswer("deny", rule_id=rid)
    if tier == Tier.AUTO.value:
        return ExternalAnswer("allow", rule_id=rid)
    return ExternalAnswer("tier", tier=Tier(tier), role=role, quorum=quorum, rule_id=rid)


def annotation_problems(policy_id: str, annotations: Mapping[str, str]) -> list[str]:
    """What the mapping cannot read in one Cedar policy's annotations (``hitl validate``)."""
    if "tier" not in annotations:
        return []
    got = _mapped(
        annotations.get("tier"), annotations.get("role"), annotations.get("quorum"), policy_id, where=policy_id
    )
    return [got] if isinstance(got, str) else []


def from_cedar(decision: str, matched: Sequence[tuple[str, str, Mapping[str, str]]]) -> ExternalAnswer:
    """Cedar's decision and the policies that decided it (``(id, effect, annotations)``), mapped. Several forbids:
    the strictest."""
    if decision == "Allow":
        return ExternalAnswer("allow", rule_id=matched[0][0] if matched else None)
    forbids = [(pid, a) for pid, effect, a in matched if effect == "forbid"]
    if not forbids:
        return ExternalAnswer.failed("no policy permits the call and none forbids it with a @tier")
    answers: list[ExternalAnswer] = []
    for pid, notes in forbids:
        got = _mapped(notes.get("tier", "deny"), notes.get("role"), notes.get("quorum"), pid, where=pid)
        if isinstance(got, str):
            return ExternalAnswer.failed(got)
        answers.append(got)
    return max(answers, key=_strictness)


def from_rego(result: object) -> ExternalAnswer:
    """A Rego decision document (``{"tier": "approve", "role": "finance", "quorum": 2, "rule": "big"}``, or
    ``{"allow": true}``), mapped; anything else fails."""
    if not isinstance(result, dict):
        return ExternalAnswer.failed("the Rego result is not an object (is the path right?)")
    rule_id = result.get("rule")
    if "tier" not in result:
        if result.get("allow") is True:
            return _mapped("auto", None, None, rule_id, where="result")  # type: ignore[return-value]
        return ExternalAnswer.failed("the Rego result has neither tier nor allow: true")
    got = _mapped(result.get("tier"), result.get("role"), result.get("quorum"), rule_id, where="result")
    return ExternalAnswer.failed(got) if isinstance(got, str) else got


def _strictness(a: ExternalAnswer) -> tuple[int, int]:
    return (99 if a.outcome == "deny" else a.tier.rank if a.tier else 0, a.quorum or 1)


@dataclass(frozen=True)
class Outcome:
    """What a source rule does to a call: raise it to ``tier`` (with ``role`` and ``quorum``) or deny it, and why:
    ``reason`` in the policy's words (the engine's answer, for ``hitl policy explain`` and the audit), ``plain`` for
    the card (the policy and rule ids only, never a rule's body or thresholds)."""

    tier: Tier
    reason: str
    plain: str
    denied: bool = False
    role: str | None = None
    quorum: int | None = None


def outcome(
    rule: str,
    source: SourceSpec,
    floor: Tier,
    answer: ExternalAnswer | None,
    *,
    role: str | None = None,
    quorum: int | None = None,
) -> Outcome:
    """What ``answer`` does to a call of a tool whose tier is ``floor`` (an allow fires at auto: it raises nothing).
    No answer, or a failed one, asks a person at ``floor``, at least approve, of the rule's own ``role`` and
    ``quorum`` (a failure never hands the call to fewer or other people than the rule names); an answer never
    lowers the call."""
    said = f"{rule}: {source.name} answered " + (answer.text() if answer is not None else "nothing: a person decides")
    if answer is None or answer.outcome == "failed":
        tier = max(floor, Tier.APPROVE, key=lambda t: t.rank)
        plain = f"The policy {source.name} (rule {rule}) could not be checked, so a person decides."
        return Outcome(tier, said + " (fail closed)", plain, role=role, quorum=quorum)
    rid = f"{rule}/{answer.rule_id}" if answer.rule_id else rule
    if answer.outcome == "allow":  # fires at auto: shown by `hitl policy explain`, raises nothing
        return Outcome(Tier.AUTO, said, "")
    if answer.outcome == "deny":
        return Outcome(Tier.ESCALATE, said, f"The policy {source.name} (rule {rid}) forbids this call.", denied=True)
    assert answer.tier is not None
    plain = f"The policy {source.name} (rule {rid}) asks for {answer.tier}."
    return Outcome(answer.tier, said, plain, role=answer.role, quorum=answer.quorum)
