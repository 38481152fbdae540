"""Slack's "Sign in with Slack" as the sandbox plays it: an OpenID Connect provider on the Slack stand-in, so the
web inbox's "Open in browser" signs in as the person picked under *Acting as* on the sandbox page.

It answers what hitl's client asks of Slack's provider: the discovery document, the keys (JWKS), the authorize
address and the token endpoint issuing an ID token with Slack's claims (``https://slack.com/user_id`` and
``https://slack.com/team_id``). Who signs in is the sandbox page's pick, which the page keeps in a cookie of this
origin (:data:`ACTING_AS`); there is no password, as the sandbox has no accounts. Everything else is checked as a
real provider checks it: the client and its secret, the registered redirect URI exactly, a code used once and within
a minute, and the PKCE verifier when a challenge was sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import unquote_plus, urlencode

from aiohttp import web
from joserfc import jwt
from joserfc.jwk import RSAKey

from hitl.sandbox.webapi import SlackState

__all__ = ["ACTING_AS", "SandboxSignIn"]

ACTING_AS = "hitl_sandbox_as"
"""The cookie the sandbox page sets to the person picked under *Acting as*."""
CODE_TTL = 60.0
"""Seconds a code may wait before it is exchanged."""
MOST_CODES = 1000
"""Codes waiting for their exchange, at most."""
TOKEN_TTL = 300
"""Seconds an ID token is valid."""
_KID = "sandbox-1"


@dataclass(frozen=True)
class _Grant:
    user: str
    nonce: str | None
    challenge: str | None
    created: float


@dataclass
class SandboxSignIn:
    """The provider: one registered client (``client_id``, ``secret``, ``redirect_uri``), signing as the issuer
    ``state.base_url`` (set once the stand-in listens) with a key made at start; ``now``: the approvals' clock, which
    hitl checks the token's times with."""

    state: SlackState
    client_id: str
    secret: str
    redirect_uri: str
    now: Callable[[], float]
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048))
    _codes: dict[str, _Grant] = field(default_factory=dict)

    def routes(self) -> list[web.RouteDef]:
        """The provider's addresses on the stand-in (Slack's own paths, but for the token endpoint's)."""
        return [
            web.get("/.well-known/openid-configuration", self.discovery),
            web.get("/openid/connect/keys", self.keys),
            web.get("/openid/connect/authorize", self.authorize),
            web.post("/openid/connect/token", self.token),
        ]

    @property
    def issuer(self) -> str:
        """The issuer: the stand-in's address."""
        return self.state.base_url

    async def discovery(self, request: web.Request) -> web.Response:
        """What Slack's discovery document says (no PKCE listed, no RFC 9207 ``iss``, RS256)."""
        return web.json_response(
            {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/openid/connect/authorize",
                "token_endpoint": f"{self.issuer}/openid/connect/token",
                "jwks_uri": f"{self.issuer}/openid/connect/keys",
                "response_types_supported": ["code"],
                "scopes_supported": ["openid", "profile", "email"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
                "claims_supported": ["sub", "auth_time", "iss", "name", "https://slack.com/team_id"],
            }
        )

    async def keys(self, request: web.Request) -> web.Response:
        """The public key ID tokens are signed with."""
        public = {**self.key.as_dict(private=False), "kid": _KID, "alg": "RS256", "use": "sig"}
        return web.json_response({"keys": [public]})

    def _refuse(self, why: str, status: int = 400) -> web.Response:
        page = f"<!doctype html><title>Sign in with Slack (sandbox)</title><h1>Cannot sign in</h1><p>{escape(why)}</p>"
        return web.Response(text=page, status=status, content_type="text/html")

    async def authorize(self, request: web.Request) -> web.Response:
        """Sign in as the sandbox page's pick and send the browser back with a code (an unknown client or redirect
        URI is never redirected to)."""
        q = request.query
        if q.get("client_id") != self.client_id or q.get("redirect_uri") != self.redirect_uri:
            return self._refuse("This app or its redirect URI is not registered with the sandbox's Slack.")
        user = request.cookies.get(ACTING_AS, "")
        if user not in self.state.users:
            return self._refuse("Pick a person under Acting as on the sandbox page, then open the link again.")
        back: dict[str, str] = {"state": q.get("state", "")}
        challenge = q.get("code_challenge")
        if q.get("response_type") != "code" or "openid" not in q.get("scope", "").split():
            back["error"] = "invalid_request"
        elif challenge is not None and q.get("code_challenge_method") != "S256":
            back["error"] = "invalid_request"
        else:
            self._forget_stale()
            code = secrets.token_urlsafe(24)
            self._codes[code] = _Grant(user, q.get("nonce"), challenge, self.now())
            back["code"] = code
        raise web.HTTPFound(f"{self.redirect_uri}?{urlencode(back)}")

    def _forget_stale(self) -> None:
        """Drop codes past their minute, and the oldest past :data:`MOST_CODES` (anyone may ask for one)."""
        now = self.now()
        for code in [c for c, g in self._codes.items() if now - g.created > CODE_TTL]:
            del self._codes[code]
        while len(self._codes) >= MOST_CODES:
            del self._codes[next(iter(self._codes))]

    def _client_ok(self, request: web.Request, form: dict[str, str]) -> bool:
        given = (form.get("client_id", ""), form.get("client_secret", ""))
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                pair = base64.b64decode(auth[6:], validate=True).decode()
            except ValueError:
                return False
            client, _, secret = pair.partition(":")
            given = (unquote_plus(client), unquote_plus(secret))
        return given[0] == self.client_id and hmac.compare_digest(given[1].encode(), self.secret.encode())

    async def token(self, request: web.Request) -> web.Response:
        """A code exchanged once for an ID token with Slack's claims."""
        form = {k: str(v) for k, v in (await request.post()).items()}
        if not self._client_ok(request, form):
            return web.json_response({"ok": False, "error": "invalid_client"}, status=401)
        grant = self._codes.pop(form.get("code", ""), None)
        now = self.now()
        if (
            form.get("grant_type") != "authorization_code"
            or grant is None
            or now - grant.created > CODE_TTL
            or form.get("redirect_uri") != self.redirect_uri
            or not _verifier_ok(grant.challenge, form.get("code_verifier"))
        ):
            return web.json_response({"ok": False, "error": "invalid_grant"}, status=400)
        return web.json_response(
            {
                "ok": True,
                "access_token": f"xoxp-sandbox-{secrets.token_hex(12)}",
                "token_type": "Bearer",
                "id_token": self._id_token(grant, now),
            }
        )

    def _id_token(self, grant: _Grant, now: float) -> str:
        person: dict[str, Any] = self.state.users.get(grant.user, {})
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": grant.user,
            "aud": self.client_id,
            "exp": int(now) + TOKEN_TTL,
            "iat": int(now),
            "auth_time": int(now),
            "https://slack.com/user_id": grant.user,
            "https://slack.com/team_id": self.state.team_id,
            "name": str(person.get("real_name") or person.get("name") or grant.user),
        }
        if grant.nonce is not None:
            claims["nonce"] = grant.nonce
        return jwt.encode({"alg": "RS256", "kid": _KID}, claims, self.key)


def _verifier_ok(challenge: str | None, verifier: str | None) -> bool:
    """PKCE (RFC 7636, S256): enforced when the authorize request sent a challenge."""
    if challenge is None:
        return True
    if not verifier:
        return False
    digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii", "replace")).digest()).rstrip(b"=")
    return hmac.compare_digest(digest.decode(), challenge)
