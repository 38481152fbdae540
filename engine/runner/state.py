"""The checkpoint of a run: everything needed to resume it without re-running finished steps."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RunState", "RunStatus"]


class RunStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    FAILED = "failed"

    @property
    def exit_code(self) -> int:
        """The CLI contract: 0 completed, 1 error, 3 stopped by a decision, 4 paused."""
        return {
            RunStatus.COMPLETED: 0,
            RunStatus.FAILED: 1,
            RunStatus.REJECTED: 3,
            RunStatus.CANCELLED: 3,
            RunStatus.EXPIRED: 3,
            RunStatus.PAUSED: 4,
            RunStatus.RUNNING: 4,
        }[self]


class RunState(BaseModel):
    """Saved after every step (compare-and-swap on its version)."""

    model_config = ConfigDict(extra="forbid")
    session_id: str
    workflow: str
    workflow_path: str
    config_path: str | None = None
    spec_hash: str
    step_hashes: dict[str, str]
    vars: dict[str, Any]
    requester: str
    position: int = 0
    outputs: dict[str, Any] = Field(default_factory=dict)
    iteration: dict[str, int] = Field(default_factory=dict)
    feedback: dict[str, str] = Field(default_factory=dict)
    status: RunStatus = RunStatus.RUNNING
    waiting: str | None = None
    """Approval id the run is paused on."""
    reason: str | None = None
    history: list[str] = Field(default_factory=list)
    """Human-readable progress lines (batch items, retries, forced resumes)."""
    version: int = 0
