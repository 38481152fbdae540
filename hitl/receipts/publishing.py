"""What ``hitl serve`` publishes of its receipt keys, and whether it has any: the keys it signs with when
``hitl.yaml`` asks for receipts, and the routes of their public halves (RFC 7517). Only ``hitl serve`` uses it.

Apart from :mod:`hitl.receipts.signing` so that a deployment with ``receipts:`` off never imports what signs:
joserfc and cryptography under it cost every start some 60 ms of CPU for keys it never reads.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.errors import PolicyError

if TYPE_CHECKING:
    from hitl.receipts.signing import SigningKeys

__all__ = ["JWKS_MAX_AGE", "JWKS_PATH", "KEYS_HISTORY_PATH", "jwks_handler", "receipt_keys"]

JWKS_PATH = "/.well-known/jwks.json"
"""Where ``hitl serve`` publishes the public keys (RFC 7517), beside its ``receipts.issuer``."""
KEYS_HISTORY_PATH = "/.well-known/jwks-history.json"
"""Every key the deployment lists, retired ones too: what an evidence record is verified with, however old."""
JWKS_MAX_AGE = 300
"""Seconds a verifier may keep the published keys (``Cache-Control``). A rotation publishes the next key (``next``)
and lets it sign only after a wait longer than any verifier's cache (docs/pages/receipts.md), so a verifier that
fetched the keys before the switch already knows the new one."""
log = logging.getLogger(__name__)


def receipt_keys(config: HitlConfig, config_path: str | None) -> SigningKeys | None:
    """The keys ``hitl serve`` signs with, when ``config`` asks for receipts (None otherwise). A key that cannot be
    used stops a production deployment from starting (:class:`PolicyError`); elsewhere it is logged and no receipt
    is issued, so every protected system refuses what it would have covered (fail closed)."""
    if config.receipts is None:
        return None
    from hitl.receipts.signing import KeyProblem, load_signing_keys  # only a deployment that signs imports joserfc

    base = Path(config_path).resolve().parent if config_path else None
    try:
        return load_signing_keys(config.receipts, base=base)
    except KeyProblem as exc:
        if config.production:
            raise PolicyError(f"production: true and receipts are configured, but {exc}") from None
        log.warning("no receipts will be issued: %s", exc)
        return None


def jwks_handler(
    keys: SigningKeys | None, *, history: bool = False
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """``GET /.well-known/jwks.json``: the public keys, cacheable for :data:`JWKS_MAX_AGE` seconds (404 when this
    deployment issues no receipts); ``history``: ``GET /.well-known/jwks-history.json``, retired keys too."""
    document = (keys.history() if history else keys.jwks()) if keys is not None else None

    async def jwks(_: web.Request) -> web.StreamResponse:
        if document is None:
            raise web.HTTPNotFound(text="this deployment issues no receipts (receipts: in hitl.yaml)")
        headers = {"Cache-Control": f"public, max-age={JWKS_MAX_AGE}"}
        return web.json_response(document, headers=headers, content_type="application/jwk-set+json")

    return jwks
