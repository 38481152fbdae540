"""The checkpoint of a run: everything needed to resume it without re-running finished steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.models import Approval

__all__ = ["RunResult", "RunState", "RunStatus", "StoredRun"]


class RunStatus(StrEnum):
    """Where a workflow run stands; its exit code is the CLI's contract."""

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

    @property
    def ended(self) -> bool:
        """Whether the run is over for good (a failed run can be resumed; these cannot)."""
        return self in (RunStatus.COMPLETED, RunStatus.REJECTED, RunStatus.CANCELLED, RunStatus.EXPIRED)


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
    on_behalf_of: str | None = None
    """The person the run acts for, as the surface that started it authenticated them (an API token's
    ``acts_for``): who confirms its calls at tier ``self``. None: nobody known (such calls are asked as approve)."""
    position: int = 0
    outputs: dict[str, Any] = Field(default_factory=dict)
    """Each finished step's output (a tool's result; an agent's structured output, else its answer)."""
    responses: dict[str, str] = Field(default_factory=dict)
    """Each finished agent step's final answer (``steps.<id>.response``)."""
    agents: dict[str, Any] = Field(default_factory=dict)
    """Agent steps under way, by ``<step>:<iteration>``: the rendered prompt and input, the model turns taken and
    the tool calls answered, so a resume replays them instead of running them again."""
    cursor: dict[str, Any] = Field(default_factory=dict)
    """Where the pattern stands: steps done, the route chosen, the loop's round, the orchestrator's tasks, the
    graph's node and visits."""
    waits: dict[str, str] = Field(default_factory=dict)
    """Steps paused at the same time (parallel branches, workers), each on its approval id."""
    iteration: dict[str, int] = Field(default_factory=dict)
    feedback: dict[str, str] = Field(default_factory=dict)
    status: RunStatus = RunStatus.RUNNING
    waiting: str | None = None
    """Approval id the run is paused on (the first, when several steps wait: see ``waits``)."""
    reason: str | None = None
    history: list[str] = Field(default_factory=list)
    """Human-readable progress lines (batch items, retries, forced resumes)."""
    version: int = 0

    def waiting_on(self) -> set[str]:
        """Every approval the run waits on; a decision on any of them resumes it."""
        return set(self.waits.values()) | ({self.waiting} if self.waiting else set())

    @classmethod
    def of(cls, stored: StoredRun) -> RunState:
        """A workflow run's checkpoint as read from the store, checked, at the version it was read at."""
        return cls.model_validate({**stored.data, "version": stored.version})


@dataclass(frozen=True)
class StoredRun:
    """A run's record as the store keeps it: its data and the version every save is fenced on.

    The run store keeps two kinds: a workflow run's checkpoint (read it as :meth:`RunState.of`) and an agent
    run's interruption (``kind: agent``, read by :class:`~hitl.engine.agents.runs.AgentRuns`).
    """

    data: dict[str, Any]
    version: int

    @property
    def status(self) -> str | None:
        """The status the record says it is in, without checking the rest of it."""
        status = self.data.get("status")
        return status if isinstance(status, str) else None


@dataclass(frozen=True)
class RunResult:
    """Where a run stands after ``start`` or ``resume``."""

    status: RunStatus
    session_id: str
    approval: Approval | None = None
    reason: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)
    history: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this result (see :attr:`RunStatus.exit_code`)."""
        return self.status.exit_code
