"""Builders for test data."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.ids import approval_id
from hitl.engine.domain.models import Approval, Tier

__all__ = ["make_approval"]


def make_approval(
    *,
    now: float,
    session_id: str = "ses_test",
    tool: str = "refund",
    args: dict[str, Any] | None = None,
    role: str | None = "support",
    quorum: int = 1,
    requester: str = "agent:riley",
    ttl: float = 3600.0,
    tier: Tier = Tier.APPROVE,
    trustable: bool = True,
    key: str | None = None,
    evidence: str = "",
) -> Approval:
    """A pending approval with sensible defaults; ``key`` varies the dedupe key."""
    args = {"order_id": "78291", "amount": 49} if args is None else args
    h = action_hash(tool, args)
    dedupe = f"{session_id}:{key or h}"
    return Approval(
        id=approval_id(dedupe),
        session_id=session_id,
        dedupe_key=dedupe,
        tool=tool,
        args=args,
        action_hash=h,
        tier=tier,
        rule="tool_tier",
        required_role=role,
        quorum=quorum,
        requester=requester,
        created_at=now,
        expires_at=now + ttl,
        trustable=trustable,
        evidence=evidence,
    )
