"""The digest a receipt binds its arguments with: base64url (no padding) of the SHA-256 of their RFC 8785 canonical
JSON. It is not the action hash's canonical form (that one keeps hitl's own number rules and a tool name): a
verifier in any language reproduces this one from the arguments alone with any RFC 8785 library."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import rfc8785

__all__ = ["args_sha256"]


def args_sha256(args: dict[str, Any]) -> str:
    """The ``args_sha256`` claim of ``args``; :class:`ValueError` for arguments RFC 8785 cannot encode (an integer
    beyond ±(2**53 - 1), a float that is not finite)."""
    try:
        canonical = rfc8785.dumps(args)
    except rfc8785.CanonicalizationError as exc:
        raise ValueError(f"the arguments cannot be put in RFC 8785 canonical JSON: {exc}") from None
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode("ascii")
