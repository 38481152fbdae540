"""Spot checks: a sample of the actions that ran without a person (the auto and notify tiers, and what a Trust let
through) is put to reviewers after the fact: "Looks right" or "Flag". Pure: no I/O.

A spot check is an approval of its own (tool ``spot:<tool>``, kind ``spot_check``) that belongs to no run and that
no caller waits on: nothing ever executes it (the gates refuse it). Its answer counts toward the tool's correction
rate (a flag is a correction), and toward the audit yield (flags per spot check).
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.models import Approval, ApprovalKind
from hitl.engine.domain.sampling import rate_for

__all__ = ["SPOT", "SPOT_CHECK", "SpotCheckSpec", "checked_tool", "is_spot_check"]

SPOT = "spot:"
"""The tool-name prefix of a spot check's approval."""
SPOT_CHECK = ApprovalKind.SPOT_CHECK
"""A spot check's kind."""


class SpotCheckSpec(BaseModel):
    """``oversight.spot_check``: the share of autonomous actions put to reviewers after the fact, by tool, else by
    tier, else ``rate`` (0: none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: float = Field(default=0.0, ge=0.0, le=1.0)
    tools: dict[str, float] = Field(default_factory=dict)
    tiers: dict[str, float] = Field(default_factory=dict)

    @functools.cached_property
    def configured(self) -> bool:
        """Whether any action is ever sampled (most deployments: none, and then an allowed call looks nothing up)."""
        return bool(self.rate or self.tools or self.tiers)

    def rate_for(self, tool: str, tier: str) -> float:
        """The sampling rate of ``tool`` at ``tier``."""
        if not self.configured:
            return 0.0
        return rate_for(tool, tier, tools=self.tools, tiers=self.tiers, rate=self.rate)


def is_spot_check(a: Approval) -> bool:
    """Whether ``a`` is a spot check (never executed; answered Looks right / Flag)."""
    return a.kind is ApprovalKind.SPOT_CHECK


def checked_tool(a: Approval) -> str:
    """The tool a spot check looks at."""
    return a.tool.removeprefix(SPOT)
