"""API tokens: minted once, stored only as SHA-256 hashes in ``hitl.yaml``, compared in constant time.

A token is ``hitl_`` and 43 URL-safe characters (256 random bits): long enough that a plain SHA-256 is the right
store for it (no salt or slow hash is needed where nobody can guess the input).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from hitl.engine.config.api import ApiTokenSpec, Scope

__all__ = ["Caller", "TokenBook", "mint_token", "token_hash"]

PREFIX = "hitl_"


def mint_token() -> str:
    """A new random token (shown once; only its hash is kept)."""
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """The SHA-256 of a token, as ``hitl.yaml`` keeps it (never the token itself)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    """Who is calling, as the token says."""

    reviewer: str
    token: str
    """The token's name (never its text)."""
    scopes: frozenset[Scope]
    roles: frozenset[str] | None
    tools: frozenset[str] | None
    audience: str | None = None
    """The protected system a ``redeem`` token speaks for (the receipts' ``aud`` it may spend)."""
    subjects: frozenset[str] = frozenset()
    """The requesters an ``evaluate`` token may ask for besides its own identity (``subjects`` in hitl.yaml)."""
    acts_for: str | None = None
    """The person the token's agent acts for (its configured ``acts_for``): who confirms its ``self`` calls."""

    @property
    def via(self) -> str:
        """The channel recorded on decisions and in the audit trail."""
        return f"api:{self.token}"

    def may(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes

    def sees(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools


class TokenBook:
    """The configured tokens, looked up by the hash of what a request presents."""

    def __init__(self, specs: list[ApiTokenSpec]) -> None:
        self._specs = [(bytes.fromhex(s.sha256), s) for s in specs]

    def __len__(self) -> int:
        return len(self._specs)

    def bearer(self, authorization: str) -> Caller | None:
        """The caller an ``Authorization`` header's value names (``Bearer <token>``), or None."""
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None
        return self.caller(presented.strip())

    def caller(self, presented: str) -> Caller | None:
        """The caller for a presented token, or None. Every entry is compared (no early exit), each in constant
        time, so neither the answer's timing nor its content says how close a guess came."""
        digest = hashlib.sha256(presented.encode("utf-8", "replace")).digest()
        found: ApiTokenSpec | None = None
        for known, spec in self._specs:
            if hmac.compare_digest(digest, known):
                found = spec
        if found is None:
            return None
        return Caller(
            reviewer=found.reviewer,
            token=found.name,
            scopes=frozenset(found.scopes),
            roles=frozenset(found.roles) if found.roles is not None else None,
            tools=frozenset(found.tools) if found.tools is not None else None,
            audience=found.audience,
            subjects=frozenset(found.subjects or ()),
            acts_for=found.acts_for,
        )
