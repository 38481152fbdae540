"""What hitl's activities and updates carry in and out of a Temporal workflow (plain dataclasses, so the workflow
sandbox and Temporal's default data converter take them as they are)."""

# No postponed annotations here: Temporal's converter reads these field types inside the workflow sandbox, where
# evaluating them again from strings fails.
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXECUTE",
    "NOT_READY",
    "PROPOSE",
    "REFUSED",
    "UPDATE",
    "Decision",
    "ExecuteInput",
    "ProposeInput",
    "Proposal",
]

PROPOSE = "hitl_propose"
EXECUTE = "hitl_execute"
UPDATE = "hitl_decision"
NOT_READY = "HitlNotReady"
"""The validator's error type for a decision that came too early: send it again later."""
REFUSED = "HitlRefused"
"""The validator's error type for a decision that is stale or not this approval's: never send it again."""


@dataclass
class ProposeInput:
    """What a workflow hands the propose activity: the call, and the workflow it pauses."""

    tool: str
    args: dict[str, Any]
    workflow_id: str
    call_id: str
    evidence: str = ""
    workflow_type: str = ""
    args_schema: dict[str, Any] | None = None


@dataclass
class Proposal:
    """The policy's answer: ``run`` now, ``deny``, or ``pending`` (an approval waits for a person)."""

    verdict: str
    args: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    approval_id: str | None = None
    version: int = 0
    action_hash: str = ""
    expires_at: float = 0.0


@dataclass
class Decision:
    """A decision as the workflow receives it (an Update, checked by its validator before it lands in history)."""

    approval_id: str | None
    status: str
    """approved, rejected, expired, cancelled (or denied, for a call the policy refused outright)."""
    version: int = 0
    action_hash: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    """What to run: the approved arguments, a reviewer's validated edit included."""
    reason: str = ""

    @property
    def approved(self) -> bool:
        """True when a person approved the call."""
        return self.status == "approved"


@dataclass
class ExecuteInput:
    """What a workflow hands the execute activity: the approved call and its claim."""

    tool: str
    args: dict[str, Any]
    approval_id: str | None
    workflow_id: str
    call_id: str
