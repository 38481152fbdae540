"""OpenID Connect's authorization code flow as the web inbox's client: the provider's discovery document, the
sign-in address (PKCE S256, ``state``, ``nonce``), the code exchanged for an ID token, and that token verified against
the issuer's keys.

The ID token is checked as OpenID Connect Core 3.1.3.7 asks: signed by a key of the issuer's JWKS with an algorithm
the provider lists (never ``none``, never a shared-secret one), ``iss`` the configured issuer, ``aud`` our client
id and no other (``azp``, when present, ours too), ``exp`` in the future, and ``nonce`` the one string this sign-in
sent. ``redirect_uri`` comes from ``web.public_url`` alone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus, urlencode

import aiohttp

from hitl.engine.config.web import WebSpec

if TYPE_CHECKING:  # joserfc (and cryptography under it) is imported by the first sign-in: see OidcClient.verify
    from joserfc.jwk import KeySet

__all__ = ["Discovery", "OidcClient", "SignInError", "basic_auth", "pkce_challenge", "random_token"]

_ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)
"""The ID token algorithms accepted at all (a provider's list is narrowed to these): public-key ones only."""
LEEWAY = 60
"""Seconds of clock difference tolerated on ``exp`` and ``iat``."""


class SignInError(Exception):
    """A sign-in refused: ``code`` for the audit trail, ``message`` for the person (what to do next)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Discovery:
    """What the provider's ``/.well-known/openid-configuration`` says that the flow uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: tuple[str, ...]
    """ID token algorithms the provider lists, narrowed to public-key ones."""
    iss_parameter: bool
    """RFC 9207: the provider sends ``iss`` with the code, which is then checked (mix-up defence)."""
    basic_auth: bool
    """Whether the token endpoint takes the client's secret as HTTP Basic (else in the form)."""


def pkce_challenge(verifier: str) -> str:
    """RFC 7636's S256 challenge of ``verifier``."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OidcClient:
    """The web inbox's client of one provider (``web.oidc``)."""

    def __init__(self, web: WebSpec, secret: str, *, now: Callable[[], float]) -> None:
        self.web = web
        self.spec = web.oidc
        self._secret = secret
        self._now = now
        self._discovery: Discovery | None = None
        self._keys: KeySet | None = None
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        return self._http

    async def close(self) -> None:
        """Close the connections to the provider."""
        if self._http is not None:
            await self._http.close()

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with self._session().get(url) as r:
                if r.status != 200:
                    raise SignInError("provider_unavailable", f"the sign-in provider answered {r.status}; try again")
                body = await r.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SignInError("provider_unavailable", "the sign-in provider cannot be reached; try again") from exc
        if not isinstance(body, dict):
            raise SignInError("provider_unavailable", "the sign-in provider's answer is not a JSON object")
        return body

    async def discovery(self) -> Discovery:
        """The provider's metadata (read once), refused unless its ``issuer`` is exactly the configured one."""
        if self._discovery is not None:
            return self._discovery
        doc = await self._get_json(f"{self.spec.issuer}/.well-known/openid-configuration")
        if doc.get("issuer") != self.spec.issuer:
            raise SignInError("provider_mismatch", "the provider's discovery names another issuer; check web.oidc")
        try:
            listed = doc.get("id_token_signing_alg_values_supported") or ["RS256"]
            methods = doc.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
            found = Discovery(
                issuer=doc["issuer"],
                authorization_endpoint=str(doc["authorization_endpoint"]),
                token_endpoint=str(doc["token_endpoint"]),
                jwks_uri=str(doc["jwks_uri"]),
                algorithms=tuple(a for a in listed if a in _ASYMMETRIC),
                iss_parameter=doc.get("authorization_response_iss_parameter_supported") is True,
                basic_auth="client_secret_basic" in methods,
            )
        except (KeyError, TypeError) as exc:
            raise SignInError("provider_mismatch", f"the provider's discovery lacks {exc}") from None
        self._discovery = found
        return found

    async def authorize_url(self, *, state: str, nonce: str, verifier: str) -> str:
        """Where the browser goes to sign in."""
        d = await self.discovery()
        query = {
            "response_type": "code",
            "client_id": self.spec.client_id,
            "redirect_uri": self.web.redirect_uri,
            "scope": " ".join(self.spec.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": pkce_challenge(verifier),
            "code_challenge_method": "S256",  # sent always; enforced by providers that support it
        }
        return f"{d.authorization_endpoint}?{urlencode(query)}"

    async def check_iss(self, iss: str | None) -> None:
        """RFC 9207: a provider that sends ``iss`` with the code must send the configured issuer (mix-up)."""
        d = await self.discovery()
        if (d.iss_parameter or iss is not None) and iss != self.spec.issuer:
            raise SignInError("issuer_mismatch", "the sign-in answer came from another issuer; sign in again")

    async def exchange(self, code: str, verifier: str) -> str:
        """The ID token for ``code`` (with the PKCE verifier and the client's secret)."""
        d = await self.discovery()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.web.redirect_uri,
            "code_verifier": verifier,
        }
        headers = {}
        if d.basic_auth:
            headers["Authorization"] = basic_auth(self.spec.client_id, self._secret)
        else:
            form |= {"client_id": self.spec.client_id, "client_secret": self._secret}
        try:
            async with self._session().post(d.token_endpoint, data=form, headers=headers) as r:
                body = await r.json(content_type=None)
                status = r.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SignInError("provider_unavailable", "the sign-in provider cannot be reached; try again") from exc
        token = body.get("id_token") if isinstance(body, dict) else None
        if status != 200 or not isinstance(token, str):
            raise SignInError("code_refused", "the sign-in provider refused the code; sign in again")
        return token

    async def _keyset(self, *, fresh: bool) -> KeySet:
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        if self._keys is None or fresh:
            d = await self.discovery()
            try:
                self._keys = KeySet.import_key_set(await self._get_json(d.jwks_uri))  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError) as exc:
                raise SignInError("provider_mismatch", "the provider's keys cannot be read") from exc
        return self._keys

    async def verify(self, id_token: str, *, nonce: str) -> dict[str, Any]:
        """The ID token's claims, once every check passed (a token signed by a key not yet known fetches the
        provider's keys once more: a rotation)."""
        # Imported at the first sign-in, not with the module: `hitl serve` imports this with every web inbox, or
        # none, and joserfc with cryptography cost each start some 60 ms of CPU.
        from joserfc import jwt
        from joserfc.errors import JoseError

        d = await self.discovery()
        if not d.algorithms:
            raise SignInError("provider_mismatch", "the provider lists no public-key algorithm for ID tokens")
        try:
            try:
                token = jwt.decode(id_token, await self._keyset(fresh=False), algorithms=list(d.algorithms))
            except (ValueError, JoseError):
                token = jwt.decode(id_token, await self._keyset(fresh=True), algorithms=list(d.algorithms))
        except (ValueError, JoseError) as exc:
            raise SignInError("token_invalid", "the ID token's signature does not verify; sign in again") from exc
        claims = dict(token.claims)
        now = int(self._now())
        registry = jwt.JWTClaimsRegistry(
            now=now,
            leeway=LEEWAY,
            iss={"essential": True, "value": self.spec.issuer},
            aud={"essential": True, "value": self.spec.client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise SignInError("token_invalid", f"the ID token is not for this sign-in ({exc}); sign in again") from exc
        # The registry lets a list claim pass when it holds the expected value: a nonce must be the one string
        # this sign-in sent, and the audience our client id alone (OIDC Core 3.1.3.7: audiences we do not trust
        # refuse the token, whatever azp says).
        got = claims["nonce"]
        if not isinstance(got, str) or not hmac.compare_digest(got.encode(), nonce.encode()):
            raise SignInError("token_invalid", "the ID token is not for this sign-in (nonce); sign in again")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if not audiences or any(a != self.spec.client_id for a in audiences):
            raise SignInError("token_invalid", "the ID token is also for other parties (aud); sign in again")
        azp = claims.get("azp")
        if azp is not None and azp != self.spec.client_id:
            raise SignInError("token_invalid", "the ID token was issued to another party (azp); sign in again")
        if not isinstance(claims["sub"], str) or not claims["sub"]:
            raise SignInError("token_invalid", "the ID token names nobody (sub); sign in again")
        return claims


def basic_auth(client_id: str, secret: str) -> str:
    """The ``Authorization`` value of client_secret_basic: both parts form-encoded first (RFC 6749 2.3.1)."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


def random_token() -> str:
    """A fresh unguessable value (256 bits) for a state, nonce, verifier, session id or CSRF token."""
    return secrets.token_urlsafe(32)
