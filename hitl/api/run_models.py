"""The bodies and answers of ``/runs``: a workflow started by its registered name, a run resumed, where it stands."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .models import ApprovalView, Id, RequestModel, ResponseModel

__all__ = ["ResumeRequest", "RunStartRequest", "RunView"]


class RunStartRequest(RequestModel):
    """Start a workflow registered under ``api.workflows``."""

    workflow: str = Field(min_length=1, max_length=64)
    """A name under ``api.workflows`` in hitl.yaml (never a path)."""
    vars: dict[str, Any] = Field(default_factory=dict)
    session_id: Id | None = None


class ResumeRequest(RequestModel):
    """Resume a run, optionally with new values for its variables."""

    vars: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the run's variables for the steps still to come."""
    force: bool = False


class RunView(ResponseModel):
    """Where a run stands, with the approvals it waits on."""

    session_id: str
    status: str
    """completed, paused, rejected, cancelled, expired, failed (or running)."""
    workflow: str | None
    position: int | None
    approval: ApprovalView | None
    """The approval the run waits on, when paused (the first of ``waiting``)."""
    waiting: list[ApprovalView] = Field(default_factory=list)
    """Every approval the run waits on: steps that run at the same time (parallel branches, workers) may each wait
    on one, and a decision on any of them resumes the run."""
    reason: str | None = None
