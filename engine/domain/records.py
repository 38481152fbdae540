"""Records the stores keep besides approvals: claims, audit entries, trust grants, pages, message refs."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.domain.models import Approval

__all__ = ["AuditEntry", "Claim", "ClaimState", "Job", "MessageRef", "Page", "TrustGrant"]


class _Rec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClaimState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Claim(_Rec):
    """An execution claim under an idempotency key.

    Recovery rule: a ``running`` claim whose lease has passed (its holder stopped renewing, e.g. it died)
    may be taken over by the next claimant, which gets ``attempt + 1``. The old holder is fenced: its
    outcome is refused. The effect receives the idempotency key, so a tool that deduplicates on it (as the
    example's does, like Stripe's API) never applies the effect twice even when the first holder died
    after the effect but before recording it.
    """

    key: str
    action_hash: str
    holder: str
    attempt: int
    state: ClaimState
    lease_until: float
    result: dict[str, Any] | None = None
    acquired: bool = False
    """True when the caller of ``claim`` now holds it and must execute."""
    recovered: bool = False
    """True when this claim took over from a holder whose lease expired."""


class AuditEntry(_Rec):
    """One append-only audit line. Evidence never goes here."""

    at: float
    actor: str
    event: str
    """created, decided, refused, expired, cancelled, superseded, claimed, executed, failed, trust_granted, ..."""
    approval_id: str | None = None
    version: int | None = None
    action_hash: str | None = None
    outcome: str = "ok"
    """``ok`` or an error code."""
    detail: str = ""
    seq: int = 0


class TrustGrant(_Rec):
    session_id: str
    tool: str
    granted_by: str
    until: float


class MessageRef(_Rec):
    channel: str
    ts: str


class Page(_Rec):
    items: list[Approval] = Field(default_factory=list)
    cursor: str | None = None
    """Pass back to get the next page; None at the end."""


class Job(_Rec):
    """A durable background job (e.g. resume a run after a decision), delivered at least once."""

    id: str
    kind: str
    payload: dict[str, Any]
    attempts: int = 1
