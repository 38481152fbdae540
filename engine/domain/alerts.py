"""Alerts on the oversight figures: thresholds per tool and tier, set in ``hitl.yaml`` from the effect and the policy,
read against the store's counts. Pure: no I/O, the figures passed in.

An alert watches one figure over a window (the last 24 h by default), for some tools and tiers (default: all):

- ``correction_rate``: the share of human decisions that modified or rejected the action;
- ``autonomous_rate``: the share of actions that ran without a person;
- ``latency_p90``: seconds within which 90% of the decisions were made (the upper bound of their latency bucket);
- ``oldest_pending``: seconds the oldest approval still waiting has waited;
- ``audit_yield``: the share of spot checks reviewers flagged;
- ``catch_rate``: the share of decided practice approvals whose planted defect was caught (low: rubber-stamping);
- ``flooded``: how many proposals a cap on approvals refused (``policy.caps``); it needs no ``min_count``.
- ``cards_undelivered``: seconds the oldest approval still waiting has waited without a card in Slack; built in
  (:func:`cards_undelivered`) when ``email:`` is set, above ``email.undelivered_after``.

It fires when the figure goes above ``above`` (or below ``below``) with at least ``min_count`` decisions (or actions)
behind a rate or latency, and resolves when it no longer does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hitl.engine.domain.durations import parse_duration
from hitl.engine.domain.tally import Outcome, TallyRow

__all__ = ["AlertFigure", "AlertRule", "AlertsSpec", "Reading", "cards_undelivered", "evaluate"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class AlertFigure(StrEnum):
    """The figures an alert can watch."""

    CORRECTION_RATE = "correction_rate"
    AUTONOMOUS_RATE = "autonomous_rate"
    LATENCY_P90 = "latency_p90"
    OLDEST_PENDING = "oldest_pending"
    AUDIT_YIELD = "audit_yield"
    CATCH_RATE = "catch_rate"
    FLOODED = "flooded"
    CARDS_UNDELIVERED = "cards_undelivered"
    """Seconds the oldest approval still waiting has waited without a card in Slack (revoked, archived, away)."""


class AlertRule(BaseModel):
    """One threshold: ``figure`` above ``above`` (or below ``below``) for ``tools`` and ``tiers``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    figure: AlertFigure
    above: float | None = None
    below: float | None = None
    tools: tuple[str, ...] | None = None
    """Only these tools (default: every tool)."""
    tiers: tuple[str, ...] | None = None
    """Only these tiers (default: every tier)."""
    min_count: int = Field(default=5, ge=1)
    """A rate or a latency needs this many decisions (actions for ``autonomous_rate``, spot checks for
    ``audit_yield``, decided practice approvals for ``catch_rate``) before it can fire."""
    reason: str = ""
    """What it means and what to do, in the posted alert."""

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError("an alert's name is lower case letters, digits and underscores, starting with a letter")
        return value

    @model_validator(mode="after")
    def _one_bound(self) -> AlertRule:
        if (self.above is None) == (self.below is None):
            raise ValueError(f"alert {self.name}: give exactly one of above: or below:")
        return self


class AlertsSpec(BaseModel):
    """The ``alerts:`` section of ``hitl.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: float = 24 * 3600.0
    """The period the rates and latency are read over (``24h``, ``7d``, or seconds)."""
    channel: str | None = None
    """Where fired and resolved alerts are posted in Slack (default: ``slack.channel``)."""
    rules: tuple[AlertRule, ...] = ()

    @field_validator("window", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return parse_duration(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _unique(self) -> AlertsSpec:
        names = [r.name for r in self.rules]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"alert names must be unique: {', '.join(twice)}")
        return self


@dataclass(frozen=True)
class Reading:
    """An alert's figure now, and whether it fires."""

    rule: AlertRule
    value: float | None
    """None: not enough behind it to judge (it does not fire)."""
    firing: bool

    def describe(self) -> str:
        """The reading in words: "correction_rate 0.60 > 0.30 (refund)"."""
        r = self.rule
        scope = ", ".join([*(r.tools or ()), *(r.tiers or ())]) or "every tool"
        bound = f"> {r.above:g}" if r.above is not None else f"< {r.below:g}"
        shown = "n/a" if self.value is None else f"{self.value:.2f}"
        return f"{r.figure} {shown} {bound} ({scope})"


def cards_undelivered(bound: float) -> AlertRule:
    """The built-in alert that fires when an approval has waited longer than ``bound`` seconds without a card in
    Slack (announced like every alert: the audit, the ``alert.fired`` webhook, the alerts channel, or e-mail to
    ``email.alert_role`` when Slack cannot take it), and resolves once every waiting approval has its card."""
    return AlertRule(
        name="cards_undelivered",
        figure=AlertFigure.CARDS_UNDELIVERED,
        above=bound,
        min_count=1,
        reason="Slack may be down, the bot's token revoked or the channel archived: the approvals wait on the web "
        "inbox, and go by e-mail where failover is set.",
    )


def evaluate(
    spec: AlertsSpec,
    rows: Sequence[TallyRow],
    oldest_pending: dict[tuple[str, str], float],
    *,
    uncarded: dict[tuple[str, str], float] | None = None,
    builtin: Sequence[AlertRule] = (),
) -> list[Reading]:
    """Every rule's reading (``spec``'s, then the ``builtin`` ones) from the window's rows, the age of the oldest
    pending approval per (tool, tier), and of the oldest without a card (``uncarded``)."""
    out = []
    for rule in [*spec.rules, *builtin]:
        waited = (uncarded or {}) if rule.figure is AlertFigure.CARDS_UNDELIVERED else oldest_pending
        value = _figure(rule, rows, waited)
        firing = value is not None and (
            (rule.above is not None and value > rule.above) or (rule.below is not None and value < rule.below)
        )
        out.append(Reading(rule, value, firing))
    return out


def _covers(rule: AlertRule, tool: str, tier: str) -> bool:
    return (rule.tools is None or tool in rule.tools) and (rule.tiers is None or tier in rule.tiers)


def _figure(rule: AlertRule, rows: Sequence[TallyRow], oldest: dict[tuple[str, str], float]) -> float | None:
    if rule.figure in (AlertFigure.OLDEST_PENDING, AlertFigure.CARDS_UNDELIVERED):  # ages, as evaluate chose
        ages = [age for (tool, tier), age in oldest.items() if _covers(rule, tool, tier)]
        return max(ages) if ages else None
    counts: dict[str, float] = {}
    for row in rows:
        if _covers(rule, row.tool, row.tier):
            for name, value in row.counts.items():
                counts[name] = counts.get(name, 0.0) + value
    merged = TallyRow("*", "*", counts)
    if rule.figure is AlertFigure.FLOODED:
        return merged.n(Outcome.FLOODED)
    if rule.figure is AlertFigure.AUTONOMOUS_RATE:
        return merged.autonomous_rate if merged.actions >= rule.min_count else None
    if rule.figure is AlertFigure.AUDIT_YIELD:
        return merged.audit_yield if merged.n(Outcome.SPOT_CHECKED) >= rule.min_count else None
    if rule.figure is AlertFigure.CATCH_RATE:
        practised = merged.n(Outcome.PRACTICE_CAUGHT) + merged.n(Outcome.PRACTICE_MISSED)
        return merged.catch_rate if practised >= rule.min_count else None
    if merged.decided < rule.min_count:
        return None
    if rule.figure is AlertFigure.CORRECTION_RATE:
        return merged.correction_rate
    return merged.latency_quantile(0.9)
