"""Running an effect exactly once: execution claims, approval transitions, recorded outcomes."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Literal

from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.journal import ClaimIntent, OutcomeRecord
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.practice import is_practice
from hitl.engine.domain.records import AuditEntry, Claim, ClaimState
from hitl.engine.domain.spot_checks import is_spot_check
from hitl.engine.errors import ClaimRefused, EngineError, ErrorCode, IllegalTransition, StaleVersion
from hitl.engine.execution.drift import DriftCheck, drifted
from hitl.engine.execution.leases import kept_alive
from hitl.engine.execution.run_lease import RunLease
from hitl.engine.execution.tools import Tool
from hitl.engine.oversight.stop_switch import StopSwitch
from hitl.engine.ports import Clock, Store
from hitl.engine.receipts.claims import Receipted
from hitl.engine.receipts.ports import ReceiptClaims

__all__ = [
    "EffectFailed",
    "EffectInDoubt",
    "Effects",
    "Resolution",
    "handed_elsewhere",
    "never_run",
    "refuse_non_actions",
]

Resolution = Literal["rerun", "done"]
"""A person's answer about an effect in doubt: run it again, or record it as done."""


class EffectFailed(EngineError):
    """The tool raised; its failure is recorded and the run stops as failed (``hitl resume`` retries it)."""

    default_code = ErrorCode.TOOL_FAILED

    def __init__(self, tool: str, error: str) -> None:
        super().__init__(
            f"{tool} failed: {error}; fix the cause, then `hitl resume` retries just this effect", tool=tool
        )
        self.tool = tool
        self.error = error


class EffectInDoubt(EngineError):
    """The holder of an execution claim died mid-effect: it may or may not have happened. The tool neither
    honours its idempotency key nor has a reconcile hook, so nothing runs until a person says what happened."""

    default_code = ErrorCode.EFFECT_IN_DOUBT

    def __init__(self, tool: str, key: str, attempt: int) -> None:
        super().__init__(
            f"{tool} may or may not have run (its worker stopped mid-effect, attempt {attempt}); check the system "
            "it acts on, then mark it done, run it again, or stop",
            tool=tool,
            key=key,
            attempt=attempt,
        )
        self.tool = tool
        self.key = key
        self.attempt = attempt


def handed_elsewhere(tool: str, approval: Approval | None, key: str) -> EngineError:
    """The refusal for a caller whose approval's one execution went to another caller."""
    which = approval.id if approval is not None else key
    return EngineError(
        f"{tool} under approval {which} was handed to another caller, which runs it; an approval authorizes one "
        "execution, so this call did not run. Ask again for a new approval if it must run again",
        code=ErrorCode.HANDED_ELSEWHERE,
        approval_id=approval.id if approval is not None else None,
        key=key,
    )


@dataclass
class Effects:
    """Runs effects at most once under their idempotency keys, exactly once after recovery.

    Args:
        store: the ledger and approvals.
        switch: the stop switch the gates share.
        clock: the time source.
        worker_id: the claim holder's name.
        lease: seconds a claim stays ours without renewal; a running effect renews it every third of that, so a
            dead holder's effect is found in doubt within one lease.
    """

    store: Store
    clock: Clock
    worker_id: str
    lease: float = 6.0
    switch: StopSwitch | None = None
    """The stop switch: no execution of a halted tool is claimed (None: a caller with no gates, such as a test)."""
    receipts: ReceiptClaims | None = None
    """``receipts:`` in ``hitl.yaml``: an approved action's execution is claimed with its receipt (None: none)."""
    drift: DriftCheck | None = None
    """The drift check an approved call passes before its claim (``consequence_check``; None: a caller with no
    service, such as a test)."""

    async def checked(self, approval: Approval | None) -> None:
        """Before an approved call's claim: the drift check (:mod:`.drift`), which raises when nothing may run."""
        if self.drift is not None:
            await self.drift.before_running(approval)

    async def handed_over(self, approval: Approval, *, key: str, attempt: int, already: bool = False) -> Approval:
        """Move ``approval`` to executing with the claim just acquired; when another caller's drift check
        superseded or expired it in between, let the claim go unrun and refuse (nothing runs). ``already``: the
        claim's own step moved it for this holder (``hitl serve``'s, claiming for this process), so the holder
        reads it instead of moving it again: one hand-over is one version and one audit line wherever it is made."""
        moved = await self.store.approvals.get(approval.id) if already else approval
        if not already or moved.status is Status.APPROVED:  # said moved, yet still approved: it is moved here
            moved = await self.mark(moved, Status.EXECUTING)
        if moved.status not in (Status.SUPERSEDED, Status.EXPIRED):
            return moved
        why = f"not run: {moved.id} is {moved.status} ({moved.reason or 'its consequence drifted'})"
        await self.store.ledger.record_outcome(
            key, holder=self.worker_id, attempt=attempt, ok=False, result={"error": why}, now=self.clock.now()
        )
        raise drifted(moved, moved.superseded_by or moved.id, why)

    async def claim(
        self,
        key: str,
        digest: str,
        approval: Approval | None,
        args: dict[str, Any],
        *,
        lease: float,
        retry_failed: bool,
    ) -> Receipted:
        """Claim the execution under ``key``: with receipts configured and an approval, with its receipt, in the
        claim's own atomic step (``hitl serve``'s, asked over its API from any other process)."""
        if self.receipts is not None and approval is not None:
            return await self.receipts.claim(
                approval,
                args,
                key=key,
                action_hash=digest,
                holder=self.worker_id,
                lease=lease,
                retry_failed=retry_failed,
            )
        claim = await self.store.ledger.claim(
            key, action_hash=digest, holder=self.worker_id, now=self.clock.now(), lease=lease, retry_failed=retry_failed
        )
        return Receipted(claim)

    async def follow(self, approval: Approval) -> Approval:
        """The approval that now stands for this action (modifications can supersede it)."""
        seen = {approval.id}
        while approval.status is Status.SUPERSEDED and approval.superseded_by:
            approval = await self.store.approvals.get(approval.superseded_by)
            if approval.id in seen:
                break
            seen.add(approval.id)
        return approval

    async def execute(
        self,
        tool: Tool,
        args: dict[str, Any],
        *,
        key: str,
        approval: Approval | None,
        resolution: Resolution | None = None,
        run_lease: RunLease | None = None,
        exclusive: bool = False,
        item_of: tuple[Approval, int] | None = None,
    ) -> Any:
        """Run ``tool`` at most once under ``key``; a repeat returns the recorded output.

        ``exclusive``: the effect is handed to one caller only. A caller that finds it run (or running) by another
        worker is refused with ``handed_elsewhere`` naming the approval, instead of being given that worker's
        output: it is a different caller that happened to wait on the same approval, not a replay of this one.

        A failed attempt is retried when the run is driven again. An attempt whose holder died (its lease ran out)
        is *in doubt*: it is run again only if the tool honours its idempotency key, else its reconcile hook says
        whether it happened, else :class:`EffectInDoubt` is raised until a person gives a ``resolution``. With
        receipts, running it again is a new attempt under the same key, whose claim issues its receipt.

        With a run's ``run_lease``, the claim is written with the run's waiting writes in one commit (which also moves
        the approval to ``executing``), and a success is recorded with its next commit.

        ``item_of``: for a batch's item, the batch's approval and the item's index (its receipt names both).
        """
        refuse_non_actions(approval)
        if self.switch is not None:
            await self.switch.check(tool.name)  # halted: nothing new runs, even what was approved before the halt
        digest = action_hash(tool.name, args)
        if resolution is None:  # a person's answer about an effect in doubt is not a new hand-over
            await self.checked(approval)
        claimed = await self._take(tool, key, digest, approval, args, run_lease, item_of, exclusive=exclusive)
        claim = claimed.claim
        if not claim.acquired:
            return await self._not_ours(tool, claim, approval, key, run_lease, exclusive=exclusive)
        reconciled: Any = None
        if claim.recovered and resolution is None:
            resolution, reconciled = await self._settle_doubt(tool, args, key, claim.attempt, digest, approval)
        if resolution == "done":
            output = reconciled if reconciled is not None else {"recorded_as_done": True, "tool": tool.name}
            return await self._done(key, claim.attempt, approval, output)
        if claim.recovered and self.receipts is not None and (approval is not None or item_of is not None):
            # It runs again. A receipt comes only with an attempt its claim acquired afresh (a recovered one gets
            # none: while in doubt, nobody may hold a receipt for it), so the attempt in doubt ends here as failed
            # and the run is a new attempt, under the same key, whose claim issues its receipt.
            await self.store.ledger.record_outcome(
                key,
                holder=self.worker_id,
                attempt=claim.attempt,
                ok=False,
                result={"error": "in doubt after its worker stopped; settled as not done, run again as a new attempt"},
                now=self.clock.now(),
            )
            claimed = await self._take(tool, key, digest, approval, args, run_lease, item_of, exclusive=exclusive)
            claim = claimed.claim
            if not claim.acquired:  # another caller ran it meanwhile
                return await self._not_ours(tool, claim, approval, key, run_lease, exclusive=exclusive)
        if approval is not None and run_lease is None:  # a run's commit moved it to executing with the claim
            approval = await self.handed_over(approval, key=key, attempt=claim.attempt, already=claimed.handed_over)
        try:
            async with self._renewing(key, claim.attempt):
                output = await tool(args, idempotency_key=key, receipt=claimed.receipt)
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
            await self._audit(
                "failed", approval, digest, str(ErrorCode.TOOL_FAILED), f"{tool.name} attempt {claim.attempt}: {error}"
            )
            raise EffectFailed(tool.name, error) from exc
        if run_lease is not None:  # recorded, with the approval's move to executed, by the run's next commit
            result = {"output": output}
            await run_lease.hold(OutcomeRecord(key, claim.attempt, True, result, approval.id if approval else None))
            return output
        return await self._done(key, claim.attempt, approval, output)

    async def _not_ours(
        self,
        tool: Tool,
        claim: Claim,
        approval: Approval | None,
        key: str,
        run_lease: RunLease | None,
        *,
        exclusive: bool,
    ) -> Any:
        """A claim not acquired: the effect ran; its recorded output (refused to another caller when exclusive)."""
        if exclusive and claim.holder != self.worker_id:
            raise handed_elsewhere(tool.name, approval, key)
        if approval is not None and run_lease is None:  # a run's commit moved it along with the claim
            await self.mark(await self.store.approvals.get(approval.id), Status.EXECUTED)
        assert claim.state is ClaimState.SUCCEEDED and claim.result is not None
        return claim.result.get("output")

    async def _take(
        self,
        tool: Tool,
        key: str,
        digest: str,
        approval: Approval | None,
        args: dict[str, Any],
        run_lease: RunLease | None,
        item_of: tuple[Approval, int] | None,
        *,
        exclusive: bool,
    ) -> Receipted:
        """Claim the execution (with a run's ``run_lease``, in its commit), a claim another worker holds refused in
        the caller's words."""
        try:
            if run_lease is None:
                return await self.claim(key, digest, approval, args, lease=self.lease, retry_failed=True)
            receipt, issued = None, None
            approved = approval if approval is not None else item_of[0] if item_of is not None else None
            if self.receipts is not None and approved is not None:
                index = item_of[1] if item_of is not None else None
                # Audited by the commit that records it, before it is handed out (the approval's evidence record
                # names it once its record is purged); a withdrawn approval refuses that commit whole.
                receipt, issued = self.receipts.sign_here(approved, args, key=key, holder=self.worker_id, index=index)
            intent = ClaimIntent(key, digest, approval.id if approval else None, receipt=issued)
            done = await run_lease.commit(claim=intent)
            if done.claim_refused is not None:
                raise done.claim_refused
            claim = done.claim
            assert claim is not None
            if receipt is None or not claim.acquired or claim.recovered:
                return Receipted(claim)
            return Receipted(claim, receipt)
        except ClaimRefused as exc:
            if exclusive and exc.code is ErrorCode.CLAIM_IN_PROGRESS:
                raise handed_elsewhere(tool.name, approval, key) from None
            if exc.code is ErrorCode.CLAIM_IN_PROGRESS:
                raise EngineError(
                    f"{tool.name} is being executed by {exc.context.get('holder')}; wait for it, then resume again",
                    code=ErrorCode.CLAIM_IN_PROGRESS,
                    key=key,
                ) from None
            raise

    async def _settle_doubt(
        self, tool: Tool, args: dict[str, Any], key: str, attempt: int, digest: str, approval: Approval | None
    ) -> tuple[Resolution, Any]:
        """Decide what an attempt in doubt means, or raise :class:`EffectInDoubt` for a person to decide."""
        if tool.idempotent:
            await self._audit("recovered", approval, digest, "ok", f"{tool.name}: re-run under the same key ({key})")
            return "rerun", None
        answer = await tool.reconcile(args, idempotency_key=key)
        if answer is not None:
            done, output = answer
            what = "it happened" if done else "it did not happen"
            await self._audit("reconciled", approval, digest, "ok", f"{tool.name}: the reconcile hook says {what}")
            return ("done", output) if done else ("rerun", None)
        # Let the claim go at once, so the person's answer can take it, then ask.
        await self.store.ledger.renew(key, holder=self.worker_id, attempt=attempt, now=self.clock.now(), lease=0.0)
        await self._audit(
            "in_doubt", approval, digest, str(ErrorCode.EFFECT_IN_DOUBT), f"{tool.name} attempt {attempt - 1}"
        )
        raise EffectInDoubt(tool.name, key, attempt)

    async def _done(self, key: str, attempt: int, approval: Approval | None, output: Any) -> Any:
        await self.store.ledger.record_outcome(
            key, holder=self.worker_id, attempt=attempt, ok=True, result={"output": output}, now=self.clock.now()
        )
        if approval is not None:
            current = await self.store.approvals.get(approval.id)
            if current.status is Status.APPROVED:  # recorded as done without running: it still passes executing
                current = await self.mark(current, Status.EXECUTING)
            await self.mark(current, Status.EXECUTED)
        return output

    def _renewing(self, key: str, attempt: int) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep the claim's lease alive while the effect runs."""

        async def renew() -> bool:
            now = self.clock.now()
            return await self.store.ledger.renew(key, holder=self.worker_id, attempt=attempt, now=now, lease=self.lease)

        return kept_alive(renew, every=self.lease / 3, what=f"the claim on {key}")

    async def _audit(self, event: str, approval: Approval | None, digest: str, outcome: str, detail: str) -> None:
        await self.store.audit.append(
            AuditEntry(
                at=self.clock.now(),
                actor=self.worker_id,
                event=event,
                approval_id=approval.id if approval else None,
                action_hash=digest,
                outcome=outcome,
                detail=detail[:500],
            )
        )

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
            except (IllegalTransition, StaleVersion):
                current = await self.store.approvals.get(approval.id)  # someone moved it: look again
        return current


def refuse_non_actions(approval: Approval | None) -> None:
    """Every execution path's check: a spot check or a practice approval is nobody's action, and never runs."""
    if approval is not None and (is_spot_check(approval) or is_practice(approval)):
        raise never_run(approval)


def never_run(check: Approval) -> EngineError:
    """The refusal every execution path gives a spot check (it looked at an action that already ran) and a practice
    approval (no caller's action)."""
    what = (
        "a spot check of an action that already ran: it is answered (Looks right / Flag)"
        if is_spot_check(check)
        else "a practice approval: no caller's action"
    )
    return EngineError(f"{check.id} is {what}, never run", code=ErrorCode.ACTION_REJECTED, approval_id=check.id)
