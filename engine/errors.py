"""Errors raised by the engine.

Every error carries a stable string code, a message that says what to do next, and structured context
(approval id, versions, states) so callers can react without parsing text::

    EngineError                      root of everything the engine raises
    ├── InvalidInput                 bad input at the API edge (nothing was written)
    ├── PolicyError                  the policy file cannot be loaded or evaluated (fail closed)
    ├── NotFound                     unknown approval / run / claim id
    ├── IllegalTransition            the state machine refuses a move
    ├── StaleVersion                 a compare-and-swap lost: an approval, a decision or a run checkpoint
    │                                changed since it was read (the same class wherever it arises)
    ├── DecisionRefused              decide() refused: decided, wrong hash, expired, ineligible, ...
    ├── ClaimRefused                 execution claim refused: in progress, hash mismatch, fenced
    ├── StoreError                   the backing store failed (never turns into an approval)
    ├── Halted                       the stop switch is on for this tool: nothing new runs or is approved
    ├── EffectFailed                 (hitl.engine.execution.effects) a tool raised; its failure is recorded
    └── EffectInDoubt                (hitl.engine.execution.effects) a crash lost an effect's outcome: a person decides

Each :class:`ErrorCode` says whether trying the same call again later can succeed (``retryable``) and
whether the caller asked for something malformed (``usage``: the CLI exits 2), so callers read the code
instead of matching message text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = [
    "ClaimRefused",
    "DecisionRefused",
    "EngineError",
    "ErrorCode",
    "Halted",
    "IllegalTransition",
    "InvalidInput",
    "NotFound",
    "PolicyError",
    "StaleVersion",
    "StoreError",
]


class ErrorCode(StrEnum):
    """Stable machine-readable error codes. Their values never change once released."""

    INVALID_INPUT = "invalid_input"
    POLICY_INVALID = "policy_invalid"
    POLICY_DENIED = "policy_denied"
    NOT_FOUND = "not_found"
    ILLEGAL_TRANSITION = "illegal_transition"
    ALREADY_DECIDED = "already_decided"
    STALE_VERSION = "stale_version"
    HASH_MISMATCH = "hash_mismatch"
    EXPIRED = "expired"
    NOT_ELIGIBLE = "not_eligible"
    SELF_APPROVAL = "self_approval"
    DUPLICATE_VOTE = "duplicate_vote"
    NOT_TRUSTABLE = "not_trustable"
    CLAIM_IN_PROGRESS = "claim_in_progress"
    CLAIM_HASH_MISMATCH = "claim_hash_mismatch"
    CLAIM_FENCED = "claim_fenced"
    STORE_ERROR = "store_error"
    ID_COLLISION = "id_collision"
    WORKFLOW_INVALID = "workflow_invalid"
    VARIABLES_INVALID = "variables_invalid"
    WORKFLOW_CHANGED = "workflow_changed"
    TOOL_FAILED = "tool_failed"
    EFFECT_IN_DOUBT = "effect_in_doubt"
    ACTION_REJECTED = "action_rejected"
    AGENT_FAILED = "agent_failed"
    HANDED_ELSEWHERE = "handed_elsewhere"
    """An approval authorizes one execution, and another caller waiting on the same approval was handed it."""
    HALTED = "halted"
    """The stop switch (``hitl halt``) covers this tool: nothing new is proposed, approved or executed until someone
    lifts it (``hitl unhalt``); rejecting still works."""
    APPROVAL_FLOOD = "approval_flood"
    """A cap in ``policy.caps`` (per requester, session or tool) is full: nothing was created; retry after the
    ``retry_after`` seconds the error carries, or ask less often."""
    CONFIRMATION_MISMATCH = "confirmation_mismatch"
    """An approval that asks the reviewer to confirm a value (``confirm:`` in the policy) was approved without it, or
    with a value that is not the one that runs: nothing was recorded; read the value on the card and type it."""
    TOO_LATE = "too_late"
    """A decision reached the store after the moment its surface had to answer by (Slack's 3 s): refused, so that
    nothing is recorded behind the back of a person who was told it was not."""
    INVALID_DELEGATE = "invalid_delegate"
    """A delegation named someone it may not be handed to: not a reviewer ``hitl.yaml``'s ``roles`` lists nor an
    active person of the Slack workspace, the agent's identity (``requester``), an API token's identity that may not
    decide, or mention markup instead of an id. Nothing was recorded; name a colleague by their reviewer id."""
    RECEIPT_UNAVAILABLE = "receipt_unavailable"
    """``receipts:`` is configured and this process could not get the execution's receipt from ``hitl serve`` (it
    holds the key; this process asks it over the API with ``HITL_API_URL`` and ``HITL_TOKEN``): nothing ran. Start
    or reach ``hitl serve``, then run the call again."""
    RECEIPT_SPENT = "receipt_spent"
    """A withdrawal came after a receipt of the approval was spent: the protected system may have acted on it, so
    the approval was not withdrawn. Look at what it did (its audit trail names the redeem) and undo it there."""
    CONSEQUENCE_DRIFTED = "consequence_drifted"
    """The tool's consequence, computed again just before the approved call would run (``consequence_check``),
    differed from the one its deciders saw: nothing ran. The approval is asked again showing both (its id in the
    error's ``approval_id``), or, after 3 drifts in a row, expired as ``drifted``."""
    CONSEQUENCE_UNCHECKED = "consequence_unchecked"
    """The tool's consequence could not be computed again just before the approved call would run (it failed, timed
    out, or every slot was busy): nothing ran and the approval stays approved. Run the call again (``hitl resume``
    for a workflow) to check again."""
    REQUEST_STATE_REFUSED = "request_state_refused"
    """An MCP client sent back a ``requestState`` the gateway did not issue for this call and this client (forged,
    altered, or another client's): nothing ran and it was audited. Call the tool again without it."""

    @property
    def retryable(self) -> bool:
        """Whether the same call may succeed later without changing it (the store came back, a concurrent
        holder finished, another worker's save landed and a fresh read will see it)."""
        return self in _RETRYABLE

    @property
    def usage(self) -> bool:
        """Whether the caller asked for something malformed (the CLI exits 2 for these)."""
        return self in _USAGE


_RETRYABLE = frozenset(
    {
        ErrorCode.STORE_ERROR,
        ErrorCode.CLAIM_IN_PROGRESS,
        ErrorCode.STALE_VERSION,
        ErrorCode.TOO_LATE,
        ErrorCode.HALTED,
        ErrorCode.APPROVAL_FLOOD,
        ErrorCode.RECEIPT_UNAVAILABLE,
        ErrorCode.CONSEQUENCE_UNCHECKED,
    }
)
_USAGE = frozenset({ErrorCode.VARIABLES_INVALID})


class EngineError(Exception):
    """Root of every error the engine raises.

    Attributes:
        code: stable machine-readable code.
        message: what went wrong and what to do next.
        context: structured details (ids, versions, states).
    """

    default_code: ErrorCode = ErrorCode.INVALID_INPUT

    def __init__(self, message: str, *, code: ErrorCode | None = None, **context: Any) -> None:
        super().__init__(message)
        self.code: ErrorCode = code or self.default_code
        self.message = message
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    @property
    def retryable(self) -> bool:
        """Whether trying the same thing again later can succeed (the code says)."""
        return self.code.retryable

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for CLIs and HTTP answers."""
        return {"code": str(self.code), "message": self.message, "retryable": self.retryable, **_jsonable(self.context)}


def _jsonable(ctx: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (v if isinstance(v, str | int | float | bool | type(None) | list | dict) else str(v)) for k, v in ctx.items()
    }


class InvalidInput(EngineError):
    """Input that fails its checks (a schema, a variable, an id); nothing changed."""

    default_code = ErrorCode.INVALID_INPUT


class PolicyError(EngineError):
    """A policy or ``hitl.yaml`` that cannot be used; nothing is allowed while it stands (fail closed)."""

    default_code = ErrorCode.POLICY_INVALID


class NotFound(EngineError):
    """No such approval, run or record (or the caller may not see it)."""

    default_code = ErrorCode.NOT_FOUND

    @classmethod
    def approval(cls, approval_id: str) -> NotFound:
        """No approval ``approval_id``: the one wording every store and surface uses, with where to look instead."""
        return cls(f"no approval {approval_id!r}; list open ones with `hitl pending`", approval_id=approval_id)

    @classmethod
    def run(cls, run_id: str) -> NotFound:
        """No run ``run_id``: the one wording every store and surface uses, with where to look instead."""
        return cls(f"no run {run_id!r}; `hitl sessions list` lists the runs that wait", session_id=run_id)


class IllegalTransition(EngineError):
    """A state change the approval state machine does not allow."""

    default_code = ErrorCode.ILLEGAL_TRANSITION


class StaleVersion(EngineError):
    """The record changed since it was read; reload and try again."""

    default_code = ErrorCode.STALE_VERSION


class DecisionRefused(EngineError):
    """A decision the engine refused (not eligible, already decided, expired, too late...), audited."""

    default_code = ErrorCode.ALREADY_DECIDED


class ClaimRefused(EngineError):
    """An execution claim the ledger refused (held elsewhere, fenced, another action's key)."""

    default_code = ErrorCode.CLAIM_IN_PROGRESS


class StoreError(EngineError):
    """The store failed or cannot be reached; nothing was applied, and retrying later is safe."""

    default_code = ErrorCode.STORE_ERROR


class Flooded(EngineError):
    """A cap on approvals is full: refused before anything was created; retry after ``retry_after`` seconds."""

    default_code = ErrorCode.APPROVAL_FLOOD


class Halted(EngineError):
    """The stop switch covers the tool: refused before anything ran or was recorded; retry once it is lifted."""

    default_code = ErrorCode.HALTED
