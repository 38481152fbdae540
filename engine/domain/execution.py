"""Pure rules for execution claims, approval transitions and checkpoint versions.

The SQLite store applies them inside a transaction; the Redis store mirrors them in Lua.
"""

from __future__ import annotations

from typing import Any

from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import Claim, ClaimState
from hitl.engine.domain.states import check_transition
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode, IllegalTransition, StaleVersion

__all__ = [
    "check_checkpoint_version",
    "claim_fenced",
    "claim_hash_mismatch",
    "claim_in_progress",
    "claim_moves",
    "finished",
    "next_claim",
    "not_owner",
    "stale_approval",
    "stale_run",
    "steps_to_executed",
    "transitioned",
]


# Errors both stores raise (SQLite from these rules, Redis from its scripts' answers): built in one place.
def claim_hash_mismatch(key: str, recorded_hash: str, action_hash: str) -> ClaimRefused:
    """The refusal of a claim whose idempotency key was used for a different action."""
    return ClaimRefused(
        f"idempotency key {key!r} was used for a different action; use a new key for a new action",
        code=ErrorCode.CLAIM_HASH_MISMATCH,
        key=key,
        recorded_hash=recorded_hash,
        action_hash=action_hash,
    )


def claim_in_progress(key: str, holder: str, attempt: int) -> ClaimRefused:
    """The refusal of a claim another holder is executing now."""
    return ClaimRefused(
        f"{key!r} is being executed by {holder} (attempt {attempt}); wait for its outcome",
        code=ErrorCode.CLAIM_IN_PROGRESS,
        key=key,
        holder=holder,
        attempt=attempt,
    )


def claim_fenced(key: str, holder: str, attempt: int) -> ClaimRefused:
    """The refusal of an outcome from a holder whose claim was taken over (its lease ran out)."""
    return ClaimRefused(
        f"{holder} no longer holds {key!r} (attempt {attempt}); its outcome was not recorded",
        code=ErrorCode.CLAIM_FENCED,
        key=key,
        holder=holder,
        attempt=attempt,
    )


def stale_approval(approval_id: str, version: int, expected: int | None) -> StaleVersion:
    """The refusal of a change to an approval that moved on since it was read."""
    return StaleVersion(
        f"{approval_id} changed (version {version}, expected {expected}); reload and retry",
        code=ErrorCode.STALE_VERSION,
        approval_id=approval_id,
        version=version,
    )


def stale_run(run_id: str, version: int, expected: int) -> StaleVersion:
    """The refusal of a checkpoint another process saved first (the run is being resumed elsewhere)."""
    return StaleVersion(
        f"run {run_id} was saved by another process (version {version}, expected {expected}); "
        "it is being resumed elsewhere",
        code=ErrorCode.STALE_VERSION,
        run_id=run_id,
        version=version,
    )


def not_owner(run_id: str, owner: str | None) -> EngineError:
    """A run's step boundary written by a worker that does not (or no longer) own the run: refused whole."""
    by = f" by {owner}" if owner else ""
    return EngineError(
        f"run {run_id} is being driven{by}, not by this worker; it continues there (try again in a few seconds)",
        code=ErrorCode.CLAIM_IN_PROGRESS,
        session_id=run_id,
    )


def next_claim(
    existing: Claim | None,
    *,
    key: str,
    action_hash: str,
    holder: str,
    now: float,
    lease: float,
    retry_failed: bool = False,
) -> Claim:
    """What a claim attempt yields. ``acquired=True`` means the caller must execute now."""
    if existing is None:
        return Claim(
            key=key,
            action_hash=action_hash,
            holder=holder,
            attempt=1,
            state=ClaimState.RUNNING,
            lease_until=now + lease,
            acquired=True,
        )
    if existing.action_hash != action_hash:
        raise claim_hash_mismatch(key, existing.action_hash, action_hash)
    if existing.state is ClaimState.SUCCEEDED or (existing.state is ClaimState.FAILED and not retry_failed):
        return existing.model_copy(update={"acquired": False, "recovered": False})
    if existing.state is ClaimState.RUNNING and now < existing.lease_until:
        raise claim_in_progress(key, existing.holder, existing.attempt)
    return Claim(
        key=key,
        action_hash=action_hash,
        holder=holder,
        attempt=existing.attempt + 1,
        state=ClaimState.RUNNING,
        lease_until=now + lease,
        acquired=True,
        recovered=existing.state is ClaimState.RUNNING,
    )


def finished(existing: Claim | None, *, key: str, holder: str, attempt: int, ok: bool, result: dict[str, Any]) -> Claim:
    """The claim with its outcome, if ``holder``/``attempt`` still hold it (otherwise fenced)."""
    if (
        existing is None
        or existing.state is not ClaimState.RUNNING
        or existing.holder != holder
        or existing.attempt != attempt
    ):
        raise claim_fenced(key, holder, attempt)
    return existing.model_copy(
        update={
            "state": ClaimState.SUCCEEDED if ok else ClaimState.FAILED,
            "result": result,
            "acquired": False,
            "recovered": False,
        }
    )


def transitioned(
    current: Approval,
    *,
    target: Status,
    expected_version: int | None,
    now: float,
    reason: str | None,
    superseded_by: str | None = None,
) -> Approval:
    """``current`` moved to ``target`` (checked against the table and the expected version); ``superseded_by``: the
    approval that asks again in its place (a drifted consequence's re-ask)."""
    if expected_version is not None and expected_version != current.version:
        raise stale_approval(current.id, current.version, expected_version)
    check_transition(current.status, target, approval_id=current.id)
    changes: dict[str, Any] = {"status": target, "version": current.version + 1, "updated_at": now}
    if reason is not None:
        changes["reason"] = reason
    if superseded_by is not None:
        changes["superseded_by"] = superseded_by
    return current.model_copy(update=changes)


def check_checkpoint_version(run_id: str, current: int, expected: int) -> None:
    """Raise :func:`stale_run` unless the stored checkpoint is still at ``expected``."""
    if current != expected:
        raise stale_run(run_id, current, expected)


def steps_to_executed(status: Status) -> tuple[Status, ...]:
    """The moves that bring an approval whose effect is known done to ``executed``: through ``executing`` from
    ``approved`` (recorded as done without being seen running), one move from ``executing``, none from any other
    state (ended otherwise: nothing to catch up)."""
    if status is Status.APPROVED:
        return (Status.EXECUTING, Status.EXECUTED)
    return (Status.EXECUTED,) if status is Status.EXECUTING else ()


def claim_moves(claim: Claim, approval: Approval) -> tuple[Status, ...]:
    """The moves ``approval`` makes with the claim of its effect. An acquired claim moves it to ``executing``, and is
    refused unless it is approved or already executing (a retry): nothing runs on an approval that is not, or no
    longer, approved (fail closed; claim nothing then). A claim that found the effect done before brings the
    approval through to ``executed`` (:func:`steps_to_executed`)."""
    if not claim.acquired:
        return steps_to_executed(approval.status)
    if approval.status not in (Status.APPROVED, Status.EXECUTING):
        raise IllegalTransition(
            f"{approval.id} is {approval.status}, not approved; {approval.tool} does not run",
            approval_id=approval.id,
            current=str(approval.status),
        )
    return (Status.EXECUTING,)
