"""Why a receipt is refused: one stable code per failure, and the error that carries it."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ReceiptError", "ReceiptFailure"]


class ReceiptFailure(StrEnum):
    """What is wrong with a receipt. The values never change once released."""

    MALFORMED = "malformed"
    """Not a compact JWS with JSON header and claims, or a claim missing or of the wrong type."""
    WRONG_TYPE = "wrong_type"
    """Its ``typ`` is not ``hitl-receipt+jwt`` (another kind of token)."""
    UNSUPPORTED = "unsupported"
    """An algorithm other than Ed25519 (``EdDSA``/``Ed25519``), or a ``crit`` header."""
    UNKNOWN_KEY = "unknown_key"
    """No key of the deployment's JWKS has its ``kid``."""
    KEYS_UNAVAILABLE = "keys_unavailable"
    """The JWKS could not be fetched: nothing can be checked (fail closed)."""
    BAD_SIGNATURE = "bad_signature"
    """The signature does not verify with the key its ``kid`` names: altered, or signed by another key."""
    EXPIRED = "expired"
    """Its ``exp`` (with the leeway) has passed, or its ``iat`` is in the future."""
    WRONG_TOOL = "wrong_tool"
    """It was issued for another tool."""
    WRONG_ARGUMENTS = "wrong_arguments"
    """It was issued for other arguments (``args_sha256`` differs)."""
    WRONG_AUDIENCE = "wrong_audience"
    """Its ``aud`` is not the checking service's (or one of them names an audience and the other none)."""
    WRONG_ISSUER = "wrong_issuer"
    """Its ``iss`` is not the deployment the checker trusts."""


class ReceiptError(Exception):
    """A refused receipt: :attr:`code` says why, the message what to do."""

    def __init__(self, code: ReceiptFailure, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
