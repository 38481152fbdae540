"""How this process claims an approved execution with its receipt, when ``receipts:`` asks for receipts: ``hitl
serve`` signs itself; every other process asks ``hitl serve`` through the :class:`~hitl.engine.receipts.ports.
ReceiptsRemote` its composition root hands it, or cannot claim at all."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hitl.engine.errors import PolicyError
from hitl.engine.ports import Clock, Store
from hitl.engine.receipts.custody import signing_key_within_reach
from hitl.engine.receipts.issuing import ReceiptIssuer, SignedClaims
from hitl.engine.receipts.ports import ReceiptClaims, ReceiptSigner, ReceiptsRemote
from hitl.engine.receipts.spec import ReceiptsSpec
from hitl.engine.receipts.unavailable import NoReceipts, UnusableKey

__all__ = ["receipt_claims_for"]


def receipt_claims_for(
    spec: ReceiptsSpec,
    *,
    store: Store,
    clock: Clock,
    signer: ReceiptSigner | None,
    production: bool,
    environ: Mapping[str, str],
    base: Path | None = None,
    remote: ReceiptsRemote | None = None,
) -> ReceiptClaims:
    """How this process claims an approved execution when ``receipts:`` asks for receipts: with ``signer``
    (``hitl serve``), itself; otherwise through ``hitl serve`` at the address ``environ`` gives (``HITL_API_URL``,
    ``HITL_TOKEN``), reached by ``remote`` (the composition root's client), or not at all.

    Under ``production: true`` a process other than ``hitl serve`` that could read a published key's private half
    (:func:`signing_key_within_reach`: the one that signs, the next one, a previous one) does not start
    (:class:`PolicyError`): an agent holding one could sign its own receipts, which is what they guard against.
    """
    always = frozenset(tool for tool, about in spec.tools.items() if about.always)
    if isinstance(signer, UnusableKey):
        return NoReceipts(signer.why, always)
    if signer is not None:
        return SignedClaims(ReceiptIssuer(spec, signer, clock), store)
    if production and (held := signing_key_within_reach(spec, environ, base=base)) is not None:
        raise PolicyError(
            f"production: true, and this process can read the receipt signing key ({held}); only hitl serve may. "
            "Remove the key from this process's environment and files; it gets its receipts from hitl serve "
            "(HITL_API_URL and HITL_TOKEN)"
        )
    through = remote(environ, always=always) if remote is not None else None
    if through is not None:
        return through
    return NoReceipts(
        "receipts: in hitl.yaml asks for a receipt with every approved execution, which only hitl serve issues, and "
        "this process cannot ask it; set HITL_API_URL and HITL_TOKEN (a token with the propose scope)",
        always,
    )
