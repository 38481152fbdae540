"""A decision request bound as a Slack card binds it: to the version and the action hash of the approval the
reviewer saw, so that a change in between refuses it instead of deciding what they did not see."""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.models import Approval, DecisionKind
from hitl.engine.domain.requests import DecideRequest

__all__ = ["bound_request"]


def bound_request(
    approval: Approval, reviewer: str, kind: DecisionKind = DecisionKind.APPROVE, **fields: Any
) -> DecideRequest:
    """``reviewer``'s ``kind`` on ``approval`` as they saw it (its version and action hash expected), with the
    request's other ``fields`` (``via``, ``reason``, ...)."""
    return DecideRequest(
        approval.id,
        reviewer,
        kind,
        expected_version=approval.version,
        expected_hash=approval.action_hash,
        **fields,
    )
