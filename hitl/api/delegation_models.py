"""The bodies and answers of ``/delegations``: a reviewer's roles handed on until a time, ended, listed."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hitl.engine.domain.delegation import Delegation

from .models import Id, RequestModel, ResponseModel, iso

__all__ = ["DelegationEnd", "DelegationList", "DelegationRequest", "DelegationView"]


class DelegationRequest(RequestModel):
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


class DelegationEnd(RequestModel):
    """Which delegation to end: ``id``, or (none) the one the caller gave."""

    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = None


class DelegationView(ResponseModel):
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


class DelegationList(ResponseModel):
    """The delegations in force that concern the caller (every one, for an admin)."""

    delegations: list[DelegationView]
