"""Checking a receipt: its signature with the deployment's key its ``kid`` names, its type, its time, and that it
is for this tool, these exact arguments and this service."""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

from hitl.receipts.digest import args_sha256
from hitl.receipts.failures import ReceiptError, ReceiptFailure
from hitl.receipts.keys import Keys

__all__ = ["ALGORITHMS", "MCP_META_KEY", "RECEIPT_TYPE", "verified_claims", "verify"]

RECEIPT_TYPE = "hitl-receipt+jwt"
"""The ``typ`` header of every receipt."""
MCP_META_KEY = "io.github.hitl-gate/receipt"
"""Where ``hitl mcp`` puts the receipt in an upstream ``tools/call`` request: its ``_meta`` key (reverse-DNS named,
as the MCP specification asks of metadata that is not the protocol's own)."""
ALGORITHMS = ("EdDSA", "Ed25519")
"""The algorithm names a receipt may carry: ``EdDSA`` (RFC 8037), and ``Ed25519``, its name since RFC 9864."""
_REQUIRED = {"iss": str, "sub": str, "jti": str, "tool": str, "args_sha256": str, "basis": str}


def verify(
    receipt: str,
    *,
    tool: str,
    args: dict[str, Any],
    keys: Keys,
    audience: str | None = None,
    leeway: float = 30.0,
    now: float | None = None,
    issuer: str | None = None,
) -> dict[str, Any]:
    """The claims of ``receipt`` when it lets ``tool`` run with exactly ``args`` here; :class:`ReceiptError` naming
    the first thing wrong otherwise. ``keys``: the deployment's public keys (a :class:`~hitl.receipts.KeySet` or
    :class:`~hitl.receipts.RemoteKeys`); ``audience``: this service's name, when its tool's receipts name one;
    ``leeway``: seconds of clock difference tolerated; ``issuer``: the deployment's URL, to check ``iss`` too.

    It checks the receipt, not that it was not used before: spend it once (``POST /api/v1/receipts/redeem``, or keep
    its ``jti`` in the same transaction as the effect)."""
    claims = verified_claims(receipt, keys=keys, audience=audience, leeway=leeway, now=now, issuer=issuer)
    if claims["tool"] != tool:
        raise ReceiptError(ReceiptFailure.WRONG_TOOL, f"issued for {claims['tool']!r}, not {tool!r}")
    try:
        digest = args_sha256(args)
    except ValueError as exc:
        raise ReceiptError(ReceiptFailure.WRONG_ARGUMENTS, str(exc)) from None
    if claims["args_sha256"] != digest:
        raise ReceiptError(ReceiptFailure.WRONG_ARGUMENTS, "issued for other arguments than these")
    return claims


def verified_claims(
    receipt: str,
    *,
    keys: Keys,
    audience: str | None = None,
    leeway: float = 30.0,
    now: float | None = None,
    issuer: str | None = None,
) -> dict[str, Any]:
    """The claims of ``receipt`` once its signature, type, time, issuer and audience check out (what :func:`verify`
    checks before the tool and the arguments, which the caller may not have: the redeem endpoint)."""
    from joserfc import jws  # at the first check, not with the package (see KeySet)
    from joserfc.errors import BadSignatureError, JoseError

    header = _header(receipt)
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise ReceiptError(ReceiptFailure.MALFORMED, "the receipt names no key (kid)")
    key = keys.key(kid)
    if key is None:
        raise ReceiptError(ReceiptFailure.UNKNOWN_KEY, f"no key {kid!r} in the deployment's keys")
    try:
        with warnings.catch_warnings():  # joserfc warns that RFC 9864 deprecates the name EdDSA: both are accepted
            warnings.simplefilter("ignore")
            payload = jws.deserialize_compact(receipt, key, algorithms=list(ALGORITHMS)).payload
    except BadSignatureError:
        raise ReceiptError(
            ReceiptFailure.BAD_SIGNATURE, "the signature does not verify: altered or signed by another key"
        ) from None
    except JoseError as exc:
        raise ReceiptError(ReceiptFailure.MALFORMED, f"not a receipt: {exc}") from None
    claims = _claims(payload)
    _check_time(claims, leeway, time.time() if now is None else now)
    if issuer is not None and claims["iss"] != issuer.rstrip("/"):
        raise ReceiptError(ReceiptFailure.WRONG_ISSUER, f"issued by {claims['iss']}, not {issuer}")
    aud = claims.get("aud")
    if aud != audience and not (isinstance(aud, list) and audience in aud):
        raise ReceiptError(ReceiptFailure.WRONG_AUDIENCE, f"issued for audience {aud!r}, not {audience!r}")
    return claims


def _header(receipt: str) -> dict[str, Any]:
    """The protected header, read before any key is chosen; only ``kid`` picks the key (never ``jku``, ``jwk``,
    ``x5u``), and a ``crit`` header is refused (nothing hitl issues has one)."""
    if not isinstance(receipt, str) or receipt.count(".") != 2 or len(receipt) > 16_000:
        raise ReceiptError(ReceiptFailure.MALFORMED, "a receipt is a compact JWS: three base64url parts")
    from joserfc import jws  # at the first check, not with the package (see KeySet)
    from joserfc.errors import JoseError

    try:
        header = jws.extract_compact(receipt.encode("ascii")).headers()
    except (JoseError, ValueError, UnicodeError):
        raise ReceiptError(ReceiptFailure.MALFORMED, "the receipt's header is not base64url JSON") from None
    if header.get("typ") != RECEIPT_TYPE:
        raise ReceiptError(ReceiptFailure.WRONG_TYPE, f"typ is {header.get('typ')!r}, not {RECEIPT_TYPE!r}")
    if "crit" in header:
        raise ReceiptError(ReceiptFailure.UNSUPPORTED, "a crit header is refused")
    if header.get("alg") not in ALGORITHMS:
        raise ReceiptError(ReceiptFailure.UNSUPPORTED, f"alg {header.get('alg')!r} is not Ed25519 (EdDSA)")
    return header


def _claims(payload: bytes) -> dict[str, Any]:
    try:
        claims = json.loads(payload)
    except ValueError:
        raise ReceiptError(ReceiptFailure.MALFORMED, "the claims are not JSON") from None
    if not isinstance(claims, dict):
        raise ReceiptError(ReceiptFailure.MALFORMED, "the claims are not a JSON object")
    for name, kind in _REQUIRED.items():
        if not isinstance(claims.get(name), kind):
            raise ReceiptError(ReceiptFailure.MALFORMED, f"the claim {name!r} is missing or not a string")
    for name in ("iat", "exp"):
        if not isinstance(claims.get(name), int | float) or isinstance(claims.get(name), bool):
            raise ReceiptError(ReceiptFailure.MALFORMED, f"the claim {name!r} is missing or not a number")
    return claims


def _check_time(claims: dict[str, Any], leeway: float, now: float) -> None:
    if now > claims["exp"] + leeway:
        raise ReceiptError(ReceiptFailure.EXPIRED, "the receipt expired; the agent must ask hitl again")
    if claims["iat"] > now + leeway:
        raise ReceiptError(ReceiptFailure.EXPIRED, "the receipt was issued in the future: check the clocks")
