"""The answers and query of ``/trust``: the trust grants in force, and how many a revocation ended."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from hitl.engine.domain.records import TrustGrant

from .models import QueryModel, ResponseModel, iso

__all__ = ["TrustList", "TrustQuery", "TrustRevoked", "TrustView"]


class TrustView(ResponseModel):
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


class TrustList(ResponseModel):
    """The trust grants in force that the caller may see (those of tools it may decide; all for an admin)."""

    grants: list[TrustView]


class TrustQuery(QueryModel):
    """Which grants to end: ``tool`` in ``session``, every requester's or one ``requester``'s."""

    session: Annotated[str, Field(min_length=1, max_length=200)]
    tool: Annotated[str, Field(min_length=1, max_length=128)]
    requester: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class TrustRevoked(ResponseModel):
    """How many grants a revocation ended."""

    revoked: int
