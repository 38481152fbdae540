"""Issuing receipts in ``hitl serve``, the one process that holds the key: for each execution attempt of an
approved action, the claims of its receipt (what the protected system checks), signed, and the record the execution
claim writes in its own atomic step. The receipt reaches the caller only when that claim is acquired for a new
attempt. Every other process claims through ``hitl serve`` (the composition root's
:class:`~hitl.engine.receipts.ports.ReceiptsRemote`), or, when it has no way to reach it, cannot claim at all
(:class:`~hitl.engine.receipts.unavailable.NoReceipts`): with ``receipts:`` configured, an execution without its
receipt never starts.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.hashing import action_hash
from hitl.engine.domain.ids import dedupe_key
from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.ports import Clock, Store
from hitl.engine.receipts.claims import (
    AllowedCall,
    Issued,
    Receipted,
    allowed_claims,
    issued_entry,
    receipt_claims,
    unsigned_entry,
)
from hitl.engine.receipts.ports import ReceiptSigner
from hitl.engine.receipts.spec import ReceiptsSpec

_ALLOWED_LEASE = 30.0
"""The lease of an allowed call's receipt claim, recorded at once: a crash between the two holds a replay only this
long (then the next asking takes the claim over and issues a receipt)."""
_REPLAY_READS, _REPLAY_PAUSE = 50, 0.02
"""How long a replay of an allowed call waits for the first asking's receipt to be recorded: up to about a second."""

__all__ = ["ReceiptIssuer", "ReceiptSweep", "SignedClaims"]


@dataclass(frozen=True)
class ReceiptIssuer:
    """What ``receipts:`` in ``hitl.yaml`` says, with the key that signs (``hitl serve``'s; None in any other
    process, which issues none: the protected system then refuses what it would have covered)."""

    spec: ReceiptsSpec
    signer: ReceiptSigner
    clock: Clock

    def issue(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[str, Issued]:
        """The receipt for one execution of ``approval`` with ``args`` (the ones that run) under the claim ``key``
        of ``holder`` (``index``: a batch's item), and its record (for the claim's atomic step)."""
        claims, issued = self.unsigned(approval, args, key=key, holder=holder, index=index)
        return self.signer.sign(claims), issued

    def unsigned(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[dict[str, Any], Issued]:
        """What :meth:`issue` signs, and its record: the record needs nothing the signature adds, so a claim can
        be on its way to the store while the claims are signed. The record carries the audit entry of its issue by
        ``holder``, which the claim's step appends with it."""
        claims = receipt_claims(
            approval,
            args=dict(args),
            issuer=self.spec.issuer,
            now=self.clock.now(),
            ttl=self.spec.ttl,
            audience=self.spec.tool(approval.tool).audience,
            index=index,
            authorization_details=self.spec.authorization_details,
        )
        entry = issued_entry(approval, claims["jti"], actor=holder, now=self.clock.now())
        return claims, Issued(jti=claims["jti"], key=key, exp=float(claims["exp"]), audit=entry)

    def issue_allowed(self, call: AllowedCall, *, subject: str, key: str) -> tuple[str, Issued]:
        """The receipt for ``call`` (run without a person), and its record, under the claim ``key``."""
        claims = allowed_claims(
            call,
            subject=subject,
            issuer=self.spec.issuer,
            now=self.clock.now(),
            ttl=self.spec.ttl,
            audience=self.spec.tool(call.tool).audience,
        )
        return self.signer.sign(claims), Issued(jti=claims["jti"], key=key, exp=float(claims["exp"]))


@dataclass(frozen=True)
class SignedClaims:
    """``hitl serve``'s claims: the receipt is recorded by the execution claim's own atomic step, and handed out only
    when that claim was acquired for a new attempt (a :class:`~hitl.engine.receipts.ports.ReceiptClaims`)."""

    issuer: ReceiptIssuer
    store: Store

    async def claim(
        self,
        approval: Approval,
        args: Mapping[str, Any],
        *,
        key: str,
        action_hash: str,
        holder: str,
        lease: float,
        retry_failed: bool = False,
    ) -> Receipted:
        """Claim the execution under ``key`` with its receipt (see :class:`~hitl.engine.receipts.ports.ReceiptClaims`).

        The claims are signed while the claim is on its way to the store (a network round trip for Redis and
        PostgreSQL, which the signing would otherwise follow): the record the claim writes needs only the claims.
        An attempt whose receipt could not be signed is recorded as failed at once, so nothing runs under it and
        the next claim (``retry_failed``) starts a new attempt with a new receipt, and the trail says the receipt
        was never handed out. The claim's step also refuses a withdrawn approval before it writes anything
        (``action_rejected``), and audits the receipt's issue with its record: one round trip to the store, as a
        claim without a receipt takes."""
        claims, issued = self.issuer.unsigned(approval, args, key=key, holder=holder)
        ledger = self.store.ledger
        claiming = asyncio.ensure_future(
            ledger.claim(
                key,
                action_hash=action_hash,
                holder=holder,
                now=self.issuer.clock.now(),
                lease=lease,
                retry_failed=retry_failed,
                receipt=issued,  # recorded, and audited, only if this attempt is handed out
            )
        )
        try:
            await asyncio.sleep(0)  # the claim starts (its request leaves) before the signing holds the loop
            unsigned: Exception | None = None
            try:
                receipt = self.issuer.signer.sign(claims)
            except Exception as exc:  # recorded on the attempt below, then raised: the claim is not lost
                receipt, unsigned = "", exc
            claim = await claiming
        finally:
            if not claiming.done():  # the caller was cancelled: the claim ends on its own; its error is not lost
                claiming.add_done_callback(_settled)
        if not claim.acquired or claim.recovered:  # nothing runs under a receipt here: none is handed out
            return Receipted(claim)
        if unsigned is not None:
            why = f"no receipt could be signed: {type(unsigned).__name__}: {unsigned}"
            now = self.issuer.clock.now()
            # The trail first: a crash between the two leaves the attempt running, found in doubt once its lease
            # runs out (nothing ran under it), never a receipt the trail says was handed out when it was not.
            await self.store.audit.append(unsigned_entry(approval, issued.jti, actor=holder, now=now, why=why))
            await ledger.record_outcome(
                key, holder=holder, attempt=claim.attempt, ok=False, result={"error": why}, now=now
            )
            if isinstance(unsigned, EngineError):
                raise unsigned
            raise EngineError(
                f"{approval.tool} under approval {approval.id} did not run: {why}. The attempt is recorded as failed; "
                "it runs again, with a new receipt, when it is claimed again",
                code=ErrorCode.RECEIPT_UNAVAILABLE,
                approval_id=approval.id,
            ) from unsigned
        # Audited (by the claim's step) before it is handed out: the approval's evidence record names it after its
        # own record is purged.
        return Receipted(claim, receipt)

    def sign_here(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[str, Issued]:
        """The receipt for a claim this process's own atomic step records (a workflow run's commit), and its record."""
        return self.issuer.issue(approval, args, key=key, holder=holder, index=index)

    def covers(self, tool: str) -> bool:
        """Whether ``receipts.tools.<tool>.always`` asks for receipts for calls that run without a person."""
        return self.issuer.spec.tool(tool).always

    async def allowed(self, call: AllowedCall) -> str:
        """Issue ``call``'s receipt: recorded by a claim of the key its subject names, finished at once (nothing
        else runs under it). The caller has checked, and counted, that the call may run without a person. The same
        call asked again (same requester, scope and arguments) gets the same receipt: its claim is taken already,
        and its outcome keeps the receipt."""
        store, now = self.store, self.issuer.clock.now()
        subject = f"allowed:{dedupe_key(call.requester, f'{call.scope}:{action_hash(call.tool, call.args)}')}"
        digest = action_hash(call.tool, call.args)
        key = f"receipt:{hashlib.sha256(subject.encode()).hexdigest()}"
        holder = f"receipts:{call.requester}"[:200]
        receipt, issued = self.issuer.issue_allowed(call, subject=subject, key=key)
        claim = await store.ledger.claim(
            key, action_hash=digest, holder=holder, now=now, lease=_ALLOWED_LEASE, receipt=issued
        )
        if claim.acquired:
            result = {"basis": str(call.basis), "receipt": receipt}
            await store.ledger.record_outcome(
                key, holder=holder, attempt=claim.attempt, ok=True, result=result, now=now
            )
            return receipt
        return await self._issued_before(key, call)

    async def _issued_before(self, key: str, call: AllowedCall) -> str:
        """The receipt the first asking of ``call`` got (its claim under ``key`` is recorded within moments of
        being taken: wait that long, no longer)."""
        for _ in range(_REPLAY_READS):
            found = await self.store.ledger.get(key)
            kept = (found.result or {}).get("receipt") if found is not None else None
            if isinstance(kept, str):
                return kept
            await asyncio.sleep(_REPLAY_PAUSE)
        raise EngineError(
            f"{call.tool}: the same call (scope {call.scope!r}) is getting its receipt right now; ask again shortly",
            code=ErrorCode.CLAIM_IN_PROGRESS,
        )


def _settled(task: asyncio.Future[Any]) -> None:
    """Retrieve a claim's outcome nobody awaits any longer (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class ReceiptSweep:
    """Removes the records of receipts past their expiry and the leeway (``hitl serve``'s background sweep)."""

    store: Store
    clock: Clock

    async def sweep(self) -> None:
        """One pass."""
        await self.store.receipts.purge(now=self.clock.now())
