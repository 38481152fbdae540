"""Issuing receipts: for each execution attempt of an approved action, the claims of its receipt (what the protected
system checks), signed by ``hitl serve``'s key, and the record the execution claim writes in its own atomic step.
The receipt reaches the caller only when that claim is acquired for a new attempt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hitl.engine.config.receipts import ReceiptsSpec
from hitl.engine.domain.models import Approval
from hitl.engine.domain.receipts import Issued, receipt_claims
from hitl.engine.ports import Clock, ReceiptSigner, Store

__all__ = ["ReceiptIssuer", "ReceiptSweep"]


@dataclass(frozen=True)
class ReceiptIssuer:
    """What ``receipts:`` in ``hitl.yaml`` says, with the key that signs (``hitl serve``'s; None in any other
    process, which issues none: the protected system then refuses what it would have covered)."""

    spec: ReceiptsSpec
    signer: ReceiptSigner | None
    clock: Clock

    def issue(self, approval: Approval, args: dict[str, Any], *, key: str) -> tuple[str, Issued] | None:
        """The receipt for one execution of ``approval`` with ``args`` (the ones that run) under the claim ``key``,
        and its record (for the claim's atomic step); None without a key."""
        if self.signer is None:
            return None
        claims = receipt_claims(
            approval,
            args=args,
            issuer=self.spec.issuer,
            now=self.clock.now(),
            ttl=self.spec.ttl,
            audience=self.spec.tool(approval.tool).audience,
        )
        return self.signer.sign(claims), Issued(jti=claims["jti"], key=key, exp=float(claims["exp"]))


@dataclass(frozen=True)
class ReceiptSweep:
    """Removes the records of receipts past their expiry and the leeway (``hitl serve``'s background sweep)."""

    store: Store
    clock: Clock

    async def sweep(self) -> None:
        """One pass."""
        await self.store.receipts.purge(now=self.clock.now())
