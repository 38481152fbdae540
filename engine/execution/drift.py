"""The drift check (``consequence_check: true``): just before an approved call is handed over to run, its tool's
consequence is computed again, with the same bounds, and compared with the one its deciders saw
(:mod:`~hitl.engine.domain.drift`). Every execution path calls it before its claim: the runner's steps, ``ask``,
``guard``, the tool gate of the framework adapters and MCP (:class:`~.effects.Effects`), and the API's
``/receipts/claim``, which hands a receipt to another process.

- The same: the call goes on to its claim.
- Different: nothing runs. A new approval asks again, showing both (its ``drift``), and supersedes the approved one
  (a move bound to its version, so of two callers that found the drift one asks again); after
  :data:`~hitl.engine.domain.drift.MAX_DRIFTS` in a row the approval expires as ``drifted`` instead. Audited
  ``consequence_drifted``; the caller gets :data:`~hitl.engine.errors.ErrorCode.CONSEQUENCE_DRIFTED`.
- Not computed (failed, timed out, busy): nothing runs and the approval stays approved; audited
  ``consequence_unchecked``; the caller gets :data:`~hitl.engine.errors.ErrorCode.CONSEQUENCE_UNCHECKED` and a
  later attempt checks again (fail closed: an unchecked call never runs).

Exactly once still holds: a check that passes only lets the caller try the one atomic claim, and a claim whose
approval was superseded or expired meanwhile (another caller's check found drift) is let go without running.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.consequences import Consequence
from hitl.engine.domain.drift import MAX_DRIFTS, ConsequenceDrift, compared_digest, drifted_reason
from hitl.engine.domain.edits import CHANGED
from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.ids import approval_id
from hitl.engine.domain.models import Approval, Status
from hitl.engine.domain.records import AuditEntry
from hitl.engine.errors import EngineError, ErrorCode, IllegalTransition, StaleVersion
from hitl.engine.service import ApprovalService
from hitl.engine.subscribers.facts import Expired

__all__ = ["DRIFT_EVENT", "UNCHECKED_EVENT", "DriftCheck", "drifted", "re_ask"]

DRIFT_EVENT = "consequence_drifted"
"""The audit event of a drift found (asked again, or expired as drifted)."""
UNCHECKED_EVENT = "consequence_unchecked"
"""The audit event of a check that could not compute the consequence again (nothing ran)."""


@dataclass
class DriftCheck:
    """The check an approved call passes before its claim, when its tool asks for one (see the module)."""

    service: ApprovalService
    actor: str
    """Who checks (the claimant's name), in the audit log."""

    async def before_running(self, approval: Approval | None) -> None:
        """Pass when ``approval`` needs no check or its consequence is unchanged; else raise (nothing runs)."""
        svc = self.service
        # What the deciders saw of what will run: after a Modify, the consequence of the edited arguments.
        seen = approval.will_happen if approval is not None else None
        if approval is None or approval.status is not Status.APPROVED or seen is None:
            return  # a retry or a recovery of a call already handed over is not checked again: it may have begun
        spec = svc.policy.spec.tools.get(approval.tool)
        if spec is None or not spec.consequence_check:
            return
        again = await svc.consequence_of(approval.model_copy(update={"args": approval.execute_args}))
        now = again.consequence
        if now is None or not now.shown:
            why = now.headline if now is not None else "not computed"
            await self._audit(approval, UNCHECKED_EVENT, "not_run", f"{why}; it stays approved, nothing ran")
            raise EngineError(
                f"{approval.tool} did not run: its consequence could not be checked again before it ran ({why}); "
                f"approval {approval.id} stays approved: run it again to check again",
                code=ErrorCode.CONSEQUENCE_UNCHECKED,
                approval_id=approval.id,
            )
        ignore = spec.consequence_ignore
        if compared_digest(seen, ignore) == compared_digest(now, ignore):
            return
        count = (approval.drift.count if approval.drift is not None else 0) + 1
        if count >= MAX_DRIFTS:
            await self._expire(approval, seen, now)
        else:
            await self._ask_again(approval, seen, now, count)

    async def _ask_again(self, approval: Approval, seen: Consequence, now: Consequence, count: int) -> None:
        """Store the approval that asks again, then supersede the drifted one with it (bound to its version); the
        new one is cancelled when another caller moved the drifted one first."""
        svc, at = self.service, self.service.clock.now()
        drift = ConsequenceDrift(of=approval.id, seen=seen, count=count)
        fresh, _ = await svc.store.approvals.create(re_ask(approval, now, drift, svc.drafts.summary, at=at))
        try:
            await svc.store.approvals.transition(
                approval.id,
                target=Status.SUPERSEDED,
                expected_version=approval.version,
                actor=self.actor,
                now=at,
                reason=f"its consequence drifted before it ran; asked again as {fresh.id}",
                superseded_by=fresh.id,
            )
        except (StaleVersion, IllegalTransition):
            await self._lost(approval, fresh)
            return
        await self._audit(approval, DRIFT_EVENT, "asked_again", f"{_digests(seen, now)}; asked again as {fresh.id}")
        if svc.notifier is not None:  # its card says it went on as the new one (no fact: its window events go on too)
            await svc.notifier.approval_changed(await svc.store.approvals.get(approval.id))
        await svc.announce(fresh)
        raise drifted(approval, fresh.id, f"asked again as {fresh.id} (drift {count} of {MAX_DRIFTS})")

    async def _expire(self, approval: Approval, seen: Consequence, now: Consequence) -> None:
        svc = self.service
        try:
            expired = await svc.store.approvals.transition(
                approval.id,
                target=Status.EXPIRED,
                expected_version=approval.version,
                actor=self.actor,
                now=svc.clock.now(),
                reason=drifted_reason(approval.id),
            )
        except (StaleVersion, IllegalTransition):
            await self._lost(approval, None)
            return
        await self._audit(approval, DRIFT_EVENT, "expired", f"{_digests(seen, now)}; {MAX_DRIFTS} in a row: expired")
        await svc.publish(Expired(expired))
        raise drifted(approval, approval.id, f"expired as drifted after {MAX_DRIFTS} drifts in a row")

    async def _lost(self, approval: Approval, fresh: Approval | None) -> None:
        """Another caller moved the drifted approval first: follow what it did (a drift it found asks again with
        the same approval as ours, its id drawn from the drifted one's), withdrawing ours when it is not that one;
        when it was handed over instead, go on to the claim, which hands it to one caller."""
        store = self.service.store
        current = await store.approvals.get(approval.id)
        if fresh is not None and current.superseded_by != fresh.id:
            try:
                await store.approvals.transition(
                    fresh.id,
                    target=Status.CANCELLED,
                    expected_version=None,
                    actor=self.actor,
                    now=self.service.clock.now(),
                    reason=f"{approval.id} was moved by another caller first",
                )
            except (StaleVersion, IllegalTransition):
                pass  # already decided: it stands on its own
        if current.status is Status.SUPERSEDED and current.superseded_by:
            raise drifted(approval, current.superseded_by, f"asked again as {current.superseded_by}")
        if current.status is Status.EXPIRED:
            raise drifted(approval, current.id, current.reason or "expired as drifted")

    async def _audit(self, approval: Approval, event: str, outcome: str, detail: str) -> None:
        await self.service.store.audit.append(
            AuditEntry(
                at=self.service.clock.now(),
                actor=self.actor[:200],
                event=event,
                approval_id=approval.id,
                version=approval.version,
                action_hash=approval.action_hash,
                outcome=outcome,
                detail=f"{approval.tool[:100]}: {detail}"[:500],
            )
        )


def drifted(approval: Approval, now_id: str, what: str) -> EngineError:
    """The refusal a caller gets when its approved call's consequence drifted: nothing ran; ``approval_id`` names
    the approval that now stands for it (asked again, or the one expired)."""
    return EngineError(
        f"{approval.tool} did not run: what it will do changed after {approval.id} was approved; {what}",
        code=ErrorCode.CONSEQUENCE_DRIFTED,
        approval_id=now_id,
        drifted=approval.id,
    )


def re_ask(
    approval: Approval,
    now: Consequence,
    drift: ConsequenceDrift,
    summary: Callable[[str, Mapping[str, Any]], str | None],
    *,
    at: float,
) -> Approval:
    """The approval that asks again about ``approval`` (approved, drifted): the same action as it would have run
    (edited arguments included), for the same people under the same rules, pending, with its consequence now and
    the one seen (``drift``); as long to answer as the first had."""
    args = approval.execute_args
    dedupe = f"{approval.dedupe_key}~drift{drift.count}"
    metadata = {k: v for k, v in approval.metadata.items() if k != CHANGED}
    shift = at - approval.created_at
    return approval.model_copy(
        update={
            "id": approval_id(dedupe),
            "dedupe_key": dedupe,
            "args": args,
            "action_hash": action_hash(approval.tool, args),
            "approved_args": None,
            "status": Status.PENDING,
            "version": 1,
            "decisions": (),
            "created_at": at,
            "expires_at": approval.expires_at + shift,
            "hand_on_at": approval.hand_on_at + shift if approval.hand_on_at is not None else None,
            "summary": summary(approval.tool, args),
            "superseded_by": None,
            "supersedes": approval.id,
            "reason": None,
            "consequence": now,
            "drift": drift,
            "metadata": {**metadata, "supersedes": approval.id},
            "updated_at": at,
        }
    )


def _digests(seen: Consequence, now: Consequence) -> str:
    return f"seen sha256 {seen.digest()}, now sha256 {now.digest()}"
