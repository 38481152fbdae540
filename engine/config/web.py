"""The ``web:`` section of ``hitl.yaml``: the web inbox, where a reviewer signs in with OpenID Connect and decides
on a page ``hitl serve`` draws.

Who a signed-in person is comes from their ID token, keyed by ``(iss, sub)``: Slack's sign-in carries the Slack
user id a click would (its ``https://slack.com/user_id`` claim, from the configured workspace only); any other
provider's subject, or its e-mail when the provider says it verified it, is mapped to a reviewer id here.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["SLACK_ISSUER", "OidcSpec", "WebSpec", "loopback"]

SLACK_ISSUER = "https://slack.com"
"""The issuer of "Sign in with Slack": every workspace shares it, so its ``team_id`` claim must be checked."""
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


def loopback(host: str | None) -> bool:
    """Whether ``host`` is this machine's own (the only place plain HTTP is allowed outside production)."""
    return host in ("127.0.0.1", "localhost", "::1")


def _http_url(value: str, what: str) -> str:
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"{what} must be an absolute http(s) URL like https://hitl.example.com, not {value!r}")
    if url.query or url.fragment or url.username or url.password:
        raise ValueError(f"{what} must carry no query, fragment or credentials: give scheme, host and path only")
    if url.scheme == "http" and not loopback(url.hostname):
        raise ValueError(f"{what} must use https:// (plain http:// is allowed only on 127.0.0.1 or localhost)")
    return value.rstrip("/")


class OidcSpec(BaseModel):
    """``web.oidc``: the OpenID Connect provider reviewers sign in with (its app registered with the redirect URI
    ``<public_url>/auth/callback``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    issuer: str = Field(min_length=1, max_length=500)
    """The provider's issuer URL, exactly as its ID tokens' ``iss`` (``https://slack.com`` for Slack)."""
    client_id: str = Field(min_length=1, max_length=500)
    """The client id of the app registered at the provider."""
    client_secret_env: str = "HITL_OIDC_CLIENT_SECRET"
    """The environment variable holding the app's client secret (never written in this file)."""
    scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "email"], min_length=1, max_length=20)
    """The scopes asked for; ``openid`` must be among them."""
    slack_team_id: str | None = Field(default=None, pattern=r"^T[A-Z0-9]{1,20}$")
    """Slack's sign-in only: the workspace whose people may sign in (its ``https://slack.com/team_id`` claim)."""

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, v: str) -> str:
        return _http_url(v, "web.oidc.issuer")

    @field_validator("client_secret_env")
    @classmethod
    def _env(cls, v: str) -> str:
        if not _ENV_NAME.match(v):
            raise ValueError(f"web.oidc.client_secret_env names an environment variable (like HITL_OIDC_SECRET): {v!r}")
        return v

    @field_validator("scopes")
    @classmethod
    def _openid(cls, v: list[str]) -> list[str]:
        if "openid" not in v:
            raise ValueError("web.oidc.scopes must include openid (without it no ID token is issued)")
        if any(not re.fullmatch(r"[\x21\x23-\x5b\x5d-\x7e]{1,100}", s) for s in v):
            raise ValueError("web.oidc.scopes are single words (no spaces, quotes or backslashes)")
        return v

    @model_validator(mode="after")
    def _slack_workspace(self) -> OidcSpec:
        if self.issuer == SLACK_ISSUER and self.slack_team_id is None:
            raise ValueError(
                "web.oidc.slack_team_id is required with Slack's sign-in: every workspace shares its issuer, so "
                "name yours (the T... id) or anyone with a Slack account could sign in"
            )
        return self


class WebSpec(BaseModel):
    """``web:``: the web inbox (``/inbox``), served by ``hitl serve`` when this section is present."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    public_url: str = Field(min_length=1, max_length=500)
    """Where people reach ``hitl serve`` (the TLS proxy in front of it): links and the sign-in's redirect URI are
    built from this alone, never from a request's ``Host``."""
    oidc: OidcSpec
    subjects: dict[str, str] = Field(default_factory=dict)
    """For providers whose subject is not a Slack id: the provider's ``sub`` -> the reviewer id (``roles:``)."""
    emails: dict[str, str] = Field(default_factory=dict)
    """A verified e-mail (``email_verified`` true from the configured issuer) -> the reviewer id."""
    idle_minutes: int = Field(default=30, ge=1, le=24 * 60)
    """A session unused this long ends."""
    absolute_hours: int = Field(default=12, ge=1, le=7 * 24)
    """A session ends this long after sign-in, used or not."""
    trusted_proxies: list[str] = Field(default_factory=list, max_length=100)
    """The proxies (CIDRs) whose ``X-Forwarded-For`` names the client: sign-ins are rate-limited per client, and
    behind a proxy every client's peer address is the proxy's. None by default: the header is then ignored."""

    @field_validator("trusted_proxies")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for cidr in v:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(
                    f"web.trusted_proxies lists networks like 10.0.0.0/8 or 192.0.2.7/32, not {cidr!r}"
                ) from None
        return v

    @field_validator("public_url")
    @classmethod
    def _public(cls, v: str) -> str:
        return _http_url(v, "web.public_url")

    @field_validator("subjects", "emails")
    @classmethod
    def _ids(cls, v: dict[str, str]) -> dict[str, str]:
        for key, reviewer in v.items():
            if not key or len(key) > 500 or not reviewer or len(reviewer) > 200:
                raise ValueError("each entry maps a non-empty subject or e-mail to a non-empty reviewer id")
        return v

    @property
    def secure(self) -> bool:
        """Whether people reach hitl over https (cookies are then Secure and ``__Host-``)."""
        return self.public_url.startswith("https://")

    @property
    def redirect_uri(self) -> str:
        """The sign-in's redirect URI, to register at the provider."""
        return f"{self.public_url}/auth/callback"

    def approval_url(self, approval_id: str) -> str:
        """The web inbox's page of one approval."""
        return f"{self.public_url}/inbox/approvals/{approval_id}"
