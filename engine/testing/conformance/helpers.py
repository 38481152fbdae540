"""Small builders the conformance suites share."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.decide import DecideCommand
from hitl.engine.domain.models import Approval, DecisionKind, Reviewer

__all__ = ["SUPPORT", "cmd"]

SUPPORT = frozenset({"support"})


def cmd(
    a: Approval,
    reviewer: str,
    kind: DecisionKind = DecisionKind.APPROVE,
    *,
    roles: frozenset[str] = SUPPORT,
    **kw: Any,
) -> DecideCommand:
    """A decide command bound to ``a``'s current version and hash."""
    fields: dict[str, Any] = {"expected_version": a.version, "expected_hash": a.action_hash, **kw}
    return DecideCommand(approval_id=a.id, reviewer=Reviewer(id=reviewer, roles=roles), kind=kind, **fields)
