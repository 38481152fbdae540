"""The bodies and answers of oversight over HTTP: the stop switch (``/halt``, ``/unhalt``, ``/halts``) and the
figures per reviewer (``/reviewers``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from hitl.engine.domain.durations import parse_duration

from .models import QueryModel, RequestModel, ResponseModel, Text

__all__ = [
    "HaltList",
    "HaltRequest",
    "HaltView",
    "ReviewerFiguresList",
    "ReviewerFiguresView",
    "ReviewersQuery",
    "UnhaltRequest",
    "Unhalted",
]


class HaltRequest(RequestModel):
    """Halt one tool, or every tool (no ``tool``): nothing new of it runs until it is unhalted."""

    tool: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None
    reason: Text = ""


class UnhaltRequest(RequestModel):
    """Lift the halt of one tool, or the one of every tool (no ``tool``)."""

    tool: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")] | None = None


class HaltView(ResponseModel):
    """A halt order in force (or just lifted)."""

    scope: str
    """The tool it halts, or ``*`` for every tool."""
    by: str
    reason: str
    at: str


class HaltList(ResponseModel):
    """The halts in force."""

    halts: list[HaltView]


class Unhalted(ResponseModel):
    """A lifted halt, and how many runs it had paused were queued to resume."""

    halt: HaltView
    resumed_runs: int


class ReviewersQuery(QueryModel):
    """How far back the figures per reviewer go."""

    since: Annotated[str, Field(pattern=r"^[0-9]+[smhdw]$", max_length=12)] = "30d"
    """A duration like ``24h``, ``7d`` or ``30d``."""

    @field_validator("since")
    @classmethod
    def _a_duration(cls, value: str) -> str:
        # A ValueError is a 422 naming the parameter: zero, or further back than the figures could reach.
        if parse_duration(value) > 10 * 365 * 86400:
            raise ValueError("since goes back at most ten years (3650d)")
        return value

    @property
    def seconds(self) -> float:
        """``since`` in seconds."""
        return parse_duration(self.since)


class ReviewerFiguresView(ResponseModel):
    """One reviewer's oversight figures over the period."""

    reviewer: str
    decisions: int
    corrections: int
    practice_caught: int
    practice_missed: int
    spot_checks: int
    spot_flags: int
    catch_rate: float | None
    audit_yield: float | None


class ReviewerFiguresList(ResponseModel):
    """The oversight figures per reviewer since ``since`` (read from the newest 10,000 approvals)."""

    since: str
    reviewers: list[ReviewerFiguresView]
