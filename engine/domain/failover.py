"""Failover: when the card cannot reach its reviewers in Slack (or they do not answer in time), the approval is
e-mailed to them as well (``failover: {to: email}`` on a tool, a rule or a tier of ``policy:``).

What fails over is delivery only: the message points at the decision page, and whoever decides there decides
through the same call as a click; a decision on any channel closes the others.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from hitl.engine.domain.durations import parse_duration, share_or_duration, share_reached_at

__all__ = ["CARD_WITHIN", "FailoverSpec", "FailsOver"]

CARD_WITHIN = 120.0
"""Seconds a card may take to be posted before its approval fails over (Slack unreachable, 5xx, 429s throughout)."""


class FailoverSpec(BaseModel):
    """``failover:``: where an approval goes when Slack cannot carry it, and when."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    to: Literal["email"]
    """The next channel (``email``: the reviewers' ``contacts:``, through ``email:``)."""
    after: Annotated[float | str, BeforeValidator(share_or_duration)] | None = None
    """Also fail over when nobody decided by then: a share of the timeout (``50%``) or a duration (``30m``)."""
    card_within: Annotated[float, BeforeValidator(parse_duration)] = Field(default=CARD_WITHIN, gt=0)
    """Fail over when no card was posted this long after the approval was created (Slack unreachable, answering
    5xx or 429 throughout); a card Slack refused (``token_revoked``, ``is_archived``, ``channel_not_found`` ...)
    fails over at once."""

    def unanswered_at(self, created_at: float, expires_at: float) -> float | None:
        """When an approval created at ``created_at`` that expires at ``expires_at`` fails over for want of a
        decision (None: never)."""
        return share_reached_at(self.after, created_at, expires_at - created_at)


class FailsOver(BaseModel):
    """A part of ``policy:`` that may name a failover (a tool, a rule, a tier)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    failover: FailoverSpec | None = None
    """Where the approval goes too when Slack cannot carry it (absent: Slack alone)."""
