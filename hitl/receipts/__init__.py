"""Receipts: what a protected system checks before it acts on a call hitl let through.

A receipt is a compact JWS (RFC 7515) signed with Ed25519 by ``hitl serve`` for one execution of one approved call:
it names the tool, the SHA-256 of the exact arguments that run (RFC 8785 canonical JSON), who approved it and for
whom, and expires in minutes. A service checks it with :func:`verify` and the deployment's public keys (its
``/.well-known/jwks.json``), and spends it once (``POST /api/v1/receipts/redeem``, or the ``jti`` stored in its own
transaction)::

    from hitl.receipts import RemoteKeys, verify

    keys = RemoteKeys("https://hitl.example.com/.well-known/jwks.json")
    claims = verify(receipt, tool="pay", args={"to": "V-1", "amount": 120}, keys=keys, audience="payments")

This module needs only ``joserfc`` and ``rfc8785``: none of the engine (joserfc is imported by the first key read
or receipt checked). Three internal modules beside it, which importing it does not load, are the composition root's:
:mod:`hitl.receipts.signing` (the keys ``hitl serve`` signs with), :mod:`hitl.receipts.publishing` (whether it has
any, and where it publishes them) and :mod:`hitl.receipts.remote` (the HTTP client a process without the key claims
through).
"""

from __future__ import annotations

from hitl.receipts.digest import args_sha256
from hitl.receipts.failures import ReceiptError, ReceiptFailure
from hitl.receipts.keys import Keys, KeySet, RemoteKeys
from hitl.receipts.verify import MCP_META_KEY, RECEIPT_TYPE, verified_claims, verify

__all__ = [
    "MCP_META_KEY",
    "RECEIPT_TYPE",
    "KeySet",
    "Keys",
    "ReceiptError",
    "ReceiptFailure",
    "RemoteKeys",
    "args_sha256",
    "verified_claims",
    "verify",
]
