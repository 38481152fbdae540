"""The receipts' ports: the ledger a store keeps of the receipts issued and their one use, the key that signs
(``hitl serve``'s alone), how an approved execution is claimed with its receipt, and how a process without the key
reaches ``hitl serve`` for its receipts (an HTTP client: the composition root's, never the engine's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from hitl.engine.domain.models import Approval
from hitl.engine.receipts.claims import AllowedCall, Issued, Receipted, ReceiptStatus, Redemption, Withdrawal

__all__ = ["ReceiptClaims", "ReceiptLedger", "ReceiptSigner", "ReceiptsRemote"]


class ReceiptLedger(Protocol):
    """The receipts issued (each recorded by the execution claim it was issued with), their one use, and the
    withdrawal of an approval whose receipts are unspent."""

    async def redeem(self, jti: str, *, approval: str, redemption: str | None, now: float) -> Redemption:
        """Spend the receipt ``jti`` of ``approval`` (:func:`~hitl.engine.receipts.claims.approval_of` its ``sub``)
        in one atomic step: the first time, or again under the same ``redemption`` id (a retry of the same use),
        says so; any other use finds it spent; one never issued here (or purged, past its ``exp`` and
        :data:`~hitl.engine.receipts.claims.LEEWAY`) is unknown; one whose approval was withdrawn first is
        withdrawn. A redeem and a :meth:`withdraw` at once: exactly one wins."""
        ...

    async def withdraw(self, approval: str, *, now: float) -> Withdrawal:
        """Withdraw ``approval`` in one atomic step, unless a receipt of it was spent first: from then on every
        receipt of it fails :meth:`redeem` (``withdrawn``), including any issued later. Withdrawn again: ``already``."""
        ...

    async def status(self, jti: str, *, approval: str, now: float) -> ReceiptStatus:
        """What the receipt ``jti`` of ``approval`` is now (introspection): spent, withdrawn, expired (its record
        gone too), or active. Reads only."""
        ...

    async def issued(self, jti: str) -> Issued | None:
        """The record of the receipt ``jti``, while it is kept."""
        ...

    async def purge(self, *, now: float) -> int:
        """Remove the records past their ``exp`` and the leeway: how many."""
        ...


class ReceiptSigner(Protocol):
    """Signs a receipt's claims (``hitl serve``'s keys: no other process holds them)."""

    def sign(self, claims: Mapping[str, Any]) -> str:
        """``claims`` as a compact JWS."""
        ...


class ReceiptClaims(Protocol):
    """Claims an approved action's execution and issues its receipt in the claim's own atomic step: ``hitl serve``
    does it itself (it holds the key); every other process asks ``hitl serve`` to, over its API."""

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
        """Claim the execution of ``approval`` with ``args`` (the ones that run) under ``key`` for ``holder``, as
        :meth:`ExecutionLedger.claim` does; the receipt comes back only with a claim acquired for a new attempt.
        Raises a :class:`~hitl.engine.errors.EngineError` (``receipt_unavailable``) when it cannot be had: then
        nothing may run."""
        ...

    def sign_here(
        self, approval: Approval, args: Mapping[str, Any], *, key: str, holder: str, index: int | None = None
    ) -> tuple[str, Issued]:
        """The receipt (and its record, with the audit entry of its issue by ``holder``) for a claim this process's
        own atomic step writes: a workflow run's commit (``index``: a batch's item). Only ``hitl serve`` can;
        elsewhere it raises (``receipt_unavailable``)."""
        ...

    def covers(self, tool: str) -> bool:
        """Whether calls of ``tool`` that run without a person get a receipt too (``always`` in ``hitl.yaml``)."""
        ...

    async def allowed(self, call: AllowedCall) -> str:
        """The receipt for a call that runs without a person, its issue recorded in an atomic step of its own
        (``hitl serve`` checks first that its policy lets the call run without a person now). Raises as
        :meth:`claim` does: then nothing may run."""
        ...


class ReceiptsRemote(Protocol):
    """How a process that does not hold the key reaches ``hitl serve`` to claim its approved executions with their
    receipts (``HITL_API_URL`` and ``HITL_TOKEN``). The composition root supplies it: the engine builds no HTTP
    client."""

    def __call__(self, environ: Mapping[str, str], *, always: frozenset[str]) -> ReceiptClaims | None:
        """The claims through the ``hitl serve`` that ``environ`` names (``always``: the tools whose calls get
        receipts even when they run without a person); None when ``environ`` names none."""
        ...
