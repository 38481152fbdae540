"""Running an effect exactly once: execution claims, approval transitions, recorded outcomes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from engine.domain.hashing import action_hash
from engine.domain.models import Approval, Status
from engine.domain.records import AuditEntry, ClaimState
from engine.errors import ClaimRefused, EngineError, ErrorCode, IllegalTransition
from engine.ports import Clock, Store
from engine.runner.tools import Tool

__all__ = ["EffectFailed", "Effects"]

log = logging.getLogger(__name__)


class EffectFailed(EngineError):
    """The tool raised; its failure is recorded and the run stops as failed (``hitl resume`` retries it)."""

    default_code = ErrorCode.TOOL_FAILED

    def __init__(self, tool: str, error: str) -> None:
        super().__init__(
            f"{tool} failed: {error}; fix the cause, then `hitl resume` retries just this effect", tool=tool
        )
        self.tool = tool
        self.error = error


@dataclass
class Effects:
    store: Store
    clock: Clock
    worker_id: str
    lease: float = 300.0

    async def follow(self, approval: Approval) -> Approval:
        """The approval that now stands for this action (modifications can supersede it)."""
        seen = {approval.id}
        while approval.status is Status.SUPERSEDED and approval.superseded_by:
            approval = await self.store.approvals.get(approval.superseded_by)
            if approval.id in seen:
                break
            seen.add(approval.id)
        return approval

    async def execute(self, tool: Tool, args: dict[str, Any], *, key: str, approval: Approval | None) -> Any:
        """Run ``tool`` at most once under ``key``; a repeat returns the recorded output.

        A failed attempt is retried when the run is driven again; a running attempt whose holder died is
        taken over after its lease (see :class:`engine.domain.records.Claim`).
        """
        digest = action_hash(tool.name, args)
        try:
            claim = await self.store.ledger.claim(
                key,
                action_hash=digest,
                holder=self.worker_id,
                now=self.clock.now(),
                lease=self.lease,
                retry_failed=True,
            )
        except ClaimRefused as exc:
            if exc.code is ErrorCode.CLAIM_IN_PROGRESS:
                raise EngineError(
                    f"{tool.name} is being executed by {exc.context.get('holder')}; wait for it, then resume again",
                    code=ErrorCode.CLAIM_IN_PROGRESS,
                    key=key,
                ) from None
            raise
        if not claim.acquired:
            if approval is not None:
                await self.mark(await self.store.approvals.get(approval.id), Status.EXECUTED)
            assert claim.state is ClaimState.SUCCEEDED and claim.result is not None
            return claim.result.get("output")
        if approval is not None:
            approval = await self.mark(approval, Status.EXECUTING)
        try:
            output = await tool(args, idempotency_key=key)
        except Exception as exc:  # any tool error is recorded, never swallowed
            error = f"{type(exc).__name__}: {exc}"
            await self.store.ledger.record_outcome(
                key,
                holder=self.worker_id,
                attempt=claim.attempt,
                ok=False,
                result={"error": error},
                now=self.clock.now(),
            )
            await self.store.audit.append(
                AuditEntry(
                    at=self.clock.now(),
                    actor=self.worker_id,
                    event="failed",
                    approval_id=approval.id if approval else None,
                    action_hash=digest,
                    outcome=str(ErrorCode.TOOL_FAILED),
                    detail=f"{tool.name} attempt {claim.attempt}: {error}"[:500],
                )
            )
            raise EffectFailed(tool.name, error) from exc
        await self.store.ledger.record_outcome(
            key, holder=self.worker_id, attempt=claim.attempt, ok=True, result={"output": output}, now=self.clock.now()
        )
        if approval is not None:
            await self.mark(approval, Status.EXECUTED)
        return output

    async def mark(self, approval: Approval, target: Status) -> Approval:
        """Move ``approval`` to executing/executed unless it is already there (or past it)."""
        current = approval
        for _ in range(3):
            if target is Status.EXECUTING and current.status not in (Status.APPROVED, Status.EXECUTING):
                return current
            if target is Status.EXECUTED and current.status is not Status.EXECUTING:
                return current
            try:
                return await self.store.approvals.transition(
                    current.id,
                    target=target,
                    expected_version=current.version,
                    actor=self.worker_id,
                    now=self.clock.now(),
                )
            except (IllegalTransition, EngineError) as exc:
                if exc.code not in (ErrorCode.STALE_VERSION, ErrorCode.ILLEGAL_TRANSITION):
                    raise
                current = await self.store.approvals.get(approval.id)  # someone moved it: look again
        return current
