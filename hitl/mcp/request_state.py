"""The ``requestState`` the gateway hands a 2026-07-28 client with ``input_required``: sealed, so the client carries it
but can neither read nor change it.

It binds one approval to one call: the approval id, the tool, the hash of its arguments (the design's action hash),
the principal that asked (the bearer token's identity over ``--http``, the configured session over stdio) and an
expiry. It is sealed with AES-256-GCM (the ``mcp`` SDK's codec: a format version and key fingerprint bound under the
tag) under the key in the environment variable ``mcp.state_key_env``, which every replica shares and which must not
be the receipt key. What it never carries is a decision: whether the call runs is read from the store on every retry.
When the call's person was asked to confirm it in a form (tier ``self``), it also carries the view that form showed
(the approval's version, action hash and view digest), so the answer decides exactly what the person saw.
When an upstream's own question ended the round (:mod:`.upstream_rounds`), it names the conversation that
question waits in, so the answer reaches that upstream call and no other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState

from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.domain.hashing import action_hash
from hitl.engine.errors import EngineError, ErrorCode, InvalidInput
from hitl.engine.ports import Clock

__all__ = ["MIN_KEY_BYTES", "Opened", "RequestStates", "StateRefused", "request_states"]

log = logging.getLogger(__name__)
MIN_KEY_BYTES = 32
"""The shortest state key accepted (the SDK's codec stretches it into the AES-256 key with HKDF)."""
_VERSION = 1


class StateRefused(EngineError):
    """A ``requestState`` the gateway will not act on: not one it sealed (forged, tampered, another key), or one it
    sealed for another principal or another call. ``reason`` says which (audited; the client is told only the
    code)."""

    default_code = ErrorCode.REQUEST_STATE_REFUSED

    def __init__(self, reason: str) -> None:
        super().__init__(
            "the requestState is not one this gateway issued for this call and this client: call the tool again "
            "without requestState to be given a fresh one",
            reason=reason,
        )
        self.reason = reason


@dataclass(frozen=True)
class Opened:
    """A state the gateway sealed for exactly this call and principal."""

    approval_id: str
    """The approval it was issued for."""
    expired: bool
    """Past its life: the call re-attaches by its dedupe key instead of by this approval id."""
    shown: tuple[int, str, str] | None = None
    """The view the confirmation form showed (version, action hash, view digest); None: no form was asked."""
    asking: str | None = None
    """The conversation whose upstream asked its own question (:mod:`.upstream_rounds`); None: no upstream asked."""


def _principal_digest(principal: str) -> str:
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).hexdigest()


class RequestStates:
    """Seal and open the gateway's ``requestState``.

    Args:
        key: the shared secret (at least :data:`MIN_KEY_BYTES` bytes).
        ttl: seconds a state is good for.
        clock: the time a state is stamped and checked with.
    """

    def __init__(self, key: bytes, *, ttl: float, clock: Clock) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise InvalidInput(f"the MCP state key must be at least {MIN_KEY_BYTES} bytes of secret randomness")
        self._codec = AESGCMRequestStateCodec([key])
        self.ttl = ttl
        self.clock = clock

    def seal(
        self,
        *,
        approval_id: str,
        tool: str,
        args: Mapping[str, Any],
        principal: str,
        shown: tuple[int, str, str] | None = None,
        asking: str | None = None,
    ) -> str:
        """The opaque state for ``approval_id``, bound to the call and its principal; ``shown``: the view a
        confirmation form showed with it (:attr:`Opened.shown`); ``asking``: the conversation an upstream's question
        waits in (:attr:`Opened.asking`)."""
        now = self.clock.now()
        claims: dict[str, Any] = {
            "v": _VERSION,
            "apr": approval_id,
            "tool": tool,
            "args": action_hash(tool, args),
            "p": _principal_digest(principal),
            "iat": now,
            "exp": now + self.ttl,
        }
        if shown is not None:
            claims["shown"] = list(shown)
        if asking is not None:
            claims["ask"] = asking
        return self._codec.seal(json.dumps(claims, separators=(",", ":")).encode())

    def open(self, token: str, *, tool: str, args: Mapping[str, Any], principal: str) -> Opened:
        """The approval ``token`` names, when this gateway sealed it for this call and ``principal``.

        Raises:
            StateRefused: ``forged`` (not sealed under this key, altered, malformed), ``other_principal``, or
                ``other_call`` (another tool or other arguments).
        """
        try:
            claims = json.loads(self._codec.unseal(token))
            approval_id, sealed_tool, sealed_args = claims["apr"], claims["tool"], claims["args"]
            version, expires, who = claims["v"], float(claims["exp"]), claims["p"]
        except (InvalidRequestState, ValueError, KeyError, TypeError):
            raise StateRefused("forged") from None
        if version != _VERSION or not isinstance(approval_id, str) or not isinstance(who, str):
            raise StateRefused("forged")
        if not secrets.compare_digest(who, _principal_digest(principal)):
            raise StateRefused("other_principal")
        try:
            same = sealed_tool == tool and sealed_args == action_hash(tool, args)
        except EngineError:  # arguments that cannot be hashed were never sealed
            same = False
        if not same:
            raise StateRefused("other_call")
        shown = claims.get("shown")
        if shown is not None and not (
            isinstance(shown, list) and len(shown) == 3 and isinstance(shown[0], int) and isinstance(shown[1], str)
        ):
            raise StateRefused("forged")
        asking = claims.get("ask")
        if asking is not None and not isinstance(asking, str):
            raise StateRefused("forged")
        # Stated positively so a NaN expiry counts as expired.
        return Opened(
            approval_id,
            expired=not (self.clock.now() < expires),
            shown=(shown[0], shown[1], str(shown[2])) if shown is not None else None,
            asking=asking,
        )


def request_states(config: HitlConfig, clock: Clock, environ: Mapping[str, str] | None = None) -> RequestStates:
    """The gateway's sealer, keyed from the environment variable ``mcp.state_key_env``.

    Without that variable the key is random to this process (a state then works only with the replica that issued
    it; replicas must share one). A key equal to the receipt key is refused: one secret never serves two purposes.
    """
    env = os.environ if environ is None else environ
    spec = config.mcp
    text = env.get(spec.state_key_env)
    if not text:
        log.warning(
            "%s is not set: MCP request states are sealed with a key of this process only (set it, the same on every "
            "replica, so a client's retry may reach any of them)",
            spec.state_key_env,
        )
        return RequestStates(secrets.token_bytes(MIN_KEY_BYTES), ttl=spec.state_ttl, clock=clock)
    if _receipt_key(config, env) == text.strip():
        raise InvalidInput(
            f"{spec.state_key_env} holds the receipt signing key: give the MCP request state a secret of its own "
            '(python -c "import secrets; print(secrets.token_hex(32))")'
        )
    key = text.encode()
    if len(key) < MIN_KEY_BYTES:
        raise InvalidInput(
            f"{spec.state_key_env} must hold at least {MIN_KEY_BYTES} bytes of secret randomness "
            '(python -c "import secrets; print(secrets.token_hex(32))")'
        )
    return RequestStates(key, ttl=spec.state_ttl, clock=clock)


def _receipt_key(config: HitlConfig, env: Mapping[str, str]) -> str | None:
    """The receipt key's text, where this process can read it (None: no receipts, or out of reach)."""
    receipts = config.receipts
    if receipts is None:
        return None
    if receipts.key_file is None:
        value = env.get(receipts.key_env)
        return value.strip() if value else None
    try:
        return Path(receipts.key_file).read_text().strip()
    except OSError:
        return None
