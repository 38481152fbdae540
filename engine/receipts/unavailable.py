"""A process that cannot get receipts: ``hitl serve`` whose key could not be used (:class:`UnusableKey`), and a
process that may not sign and has no ``hitl serve`` to ask (:class:`NoReceipts`). Either refuses every claim a
receipt would cover before anything is claimed, so nothing runs without its receipt (``receipt_unavailable``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.models import Approval
from hitl.engine.errors import EngineError, ErrorCode
from hitl.engine.receipts.claims import AllowedCall, Issued, Receipted

__all__ = ["NoReceipts", "UnusableKey"]


@dataclass(frozen=True)
class UnusableKey:
    """``hitl serve``'s signer when ``receipts:`` is configured but its key could not be used (outside production,
    which does not start then). Its process claims like one with no way to sign (:class:`NoReceipts`): every claim
    of an approved execution is refused before anything is claimed, so nothing a receipt would cover runs."""

    why: str = (
        "hitl serve could not read its receipt signing key (see its log), so it issues no receipt; fix "
        "receipts.key_file or HITL_RECEIPT_KEY and restart hitl serve"
    )

    def sign(self, claims: Mapping[str, Any]) -> str:
        """Refuse (``receipt_unavailable``)."""
        raise EngineError(
            f"{claims.get('tool', 'the call')} did not run: {self.why}", code=ErrorCode.RECEIPT_UNAVAILABLE
        )


@dataclass(frozen=True)
class NoReceipts:
    """A process that may not sign and has no ``hitl serve`` to ask (``HITL_API_URL`` and ``HITL_TOKEN`` unset): every
    claim of an approved execution is refused, so nothing a receipt should cover runs without one."""

    why: str
    always: frozenset[str] = frozenset()
    """The tools whose calls get receipts even when they run without a person."""

    def sign_here(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[str, Issued]:
        """Refuse (``receipt_unavailable``): nothing is claimed, so nothing runs."""
        raise EngineError(
            f"{approval.tool} under approval {approval.id} did not run: {self.why}",
            code=ErrorCode.RECEIPT_UNAVAILABLE,
            approval_id=approval.id,
        )

    def covers(self, tool: str) -> bool:
        """Whether calls of ``tool`` that run without a person need a receipt too (and so are refused here)."""
        return tool in self.always

    async def allowed(self, call: AllowedCall) -> str:
        """Refuse (``receipt_unavailable``): the call does not run."""
        raise EngineError(f"{call.tool} did not run: {self.why}", code=ErrorCode.RECEIPT_UNAVAILABLE)

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
        """Refuse (``receipt_unavailable``): nothing is claimed, so nothing runs."""
        raise EngineError(
            f"{approval.tool} under approval {approval.id} did not run: {self.why}",
            code=ErrorCode.RECEIPT_UNAVAILABLE,
            approval_id=approval.id,
        )
