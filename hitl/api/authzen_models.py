"""The bodies of the AuthZEN Authorization API 1.0 as hitl reads and answers them: the subject, action, resource and
context of an access evaluation, a batch of them with defaults from its top level, the decision, and the decision
point's metadata. Identities and names are bounded like everywhere else in the API; ``properties`` are accepted as
the standard allows and never read (nothing in them decides anything here)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AuthzenAction",
    "AuthzenContext",
    "AuthzenMetadata",
    "AuthzenResource",
    "AuthzenSubject",
    "Decision",
    "Decisions",
    "EvaluationItem",
    "EvaluationRequest",
    "EvaluationsOptions",
    "EvaluationsRequest",
]

_Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
"""A name or id: bounded, and without control characters (as the API's ids: a NUL is text no store can keep, so
it is refused here with a 400 rather than failing in PostgreSQL as a 503)."""


# Built at the first AuthZEN request, not at import (defer_build): most servers never get one.
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class AuthzenSubject(_Body):
    """Who asks: ``id`` is the requester hitl counts and shows reviewers (bound to the token)."""

    type: _Name
    id: _Name
    properties: dict[str, Any] | None = None


class AuthzenAction(_Body):
    """What the subject does: the tool's name, or a verb of calling it (``call``, ``tools/call``...)."""

    name: _Name
    properties: dict[str, Any] | None = None


class AuthzenResource(_Body):
    """What it is done to: ``id`` is the tool."""

    type: _Name
    id: _Name
    properties: dict[str, Any] | None = None


class AuthzenContext(BaseModel):
    """The call's own facts: its arguments, its session and its id. Other keys a gateway adds are ignored (the
    standard leaves the context open); none of them can change what is decided."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    arguments: dict[str, Any] = Field(default_factory=dict)
    session: _Name = "authzen"
    request_id: _Name | None = None
    """The call's id: asking again with it is the same call (counted once, the same answer)."""


class EvaluationRequest(_Body):
    """``POST /access/v1/evaluation``: may this subject make this call now?"""

    subject: AuthzenSubject
    action: AuthzenAction
    resource: AuthzenResource
    context: AuthzenContext = Field(default_factory=AuthzenContext)


class EvaluationItem(_Body):
    """One item of a batch: what it leaves out is taken from the batch's top level."""

    subject: AuthzenSubject | None = None
    action: AuthzenAction | None = None
    resource: AuthzenResource | None = None
    context: AuthzenContext | None = None


class EvaluationsOptions(BaseModel):
    """How a batch is evaluated (the standard's ``evaluations_semantic``); other options are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    evaluations_semantic: Literal["execute_all", "deny_on_first_deny", "permit_on_first_permit"] = "execute_all"


class EvaluationsRequest(_Body):
    """``POST /access/v1/evaluations``: a batch, each item one call (and counted as one)."""

    subject: AuthzenSubject | None = None
    action: AuthzenAction | None = None
    resource: AuthzenResource | None = None
    context: AuthzenContext | None = None
    evaluations: list[EvaluationItem] | None = Field(default=None, max_length=64)
    options: EvaluationsOptions = Field(default_factory=EvaluationsOptions)


class Decision(_Body):
    """The answer: ``decision`` and, in ``context``, why (reason codes, never a rule's body or threshold) and, for a
    call that may run, its single-use receipt."""

    decision: bool
    context: dict[str, Any] = Field(default_factory=dict)


class Decisions(_Body):
    """A batch's answers, in the order asked (fewer when the batch stopped at its first deny or permit)."""

    evaluations: list[Decision]


class AuthzenMetadata(_Body):
    """``GET /.well-known/authzen-configuration``: where this decision point answers."""

    policy_decision_point: str
    access_evaluation_endpoint: str
    access_evaluations_endpoint: str
