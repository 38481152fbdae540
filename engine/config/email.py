"""The ``email:`` and ``contacts:`` sections of ``hitl.yaml``: the SMTP server hitl sends approval e-mail through,
and each reviewer's address.

E-mail is delivery, never authority: a message only points its reader at the decision page (``web.public_url``),
where they sign in and decide under their own identity. So ``email:`` needs ``web:``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hitl.engine.domain.durations import Seconds
from hitl.engine.domain.models import Tier

__all__ = ["ContactSpec", "EmailSpec", "plain_to_network"]

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
"""An address as hitl accepts it: a plain ``local@domain``, ASCII, no display name, no quoting, no spaces or line
breaks (nothing that could become a second header or a second recipient)."""


def _address(value: str, where: str) -> str:
    if not _ADDRESS.fullmatch(value) or ".." in value:
        raise ValueError(f"{where} must be a plain e-mail address like alice@example.com, not {value!r}")
    return value


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class EmailSpec(BaseModel):
    """``email:``: the SMTP server approval e-mail goes through, and which approvals get it."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    smtp_url: str = Field(min_length=1, max_length=500)
    """``smtp://host:port`` (plain, for a relay on this machine; with ``starttls: true`` upgraded to TLS) or
    ``smtps://host:port`` (TLS from the first byte). No credentials here: see ``username_env``."""
    starttls: bool = False
    """Upgrade an ``smtp://`` connection with STARTTLS before anything is sent (refused if the server cannot)."""
    username_env: str | None = None
    """The environment variable holding the SMTP user name (none: no login)."""
    password_env: str | None = None
    """The environment variable holding the SMTP password (never written in this file)."""
    from_: str = Field(alias="from", min_length=3, max_length=254)
    """The sender's address (plain ``hitl@example.com``)."""
    details: Literal["summary", "full"] = "summary"
    """``summary``: the action's sentence, why it needs a person and the link; ``full``: also each argument (redacted)
    and the evidence, apart. The decision page always shows everything, to the signed-in reviewer only."""
    tools: list[str] = Field(default_factory=list, max_length=500)
    """The tools whose approvals are e-mailed to their reviewers (``"*"``: every tool)."""
    tiers: list[Tier] = Field(default_factory=list, max_length=5)
    """The tiers whose approvals are e-mailed (``escalate``, say), whatever the tool."""
    alert_role: str | None = Field(default=None, max_length=64)
    """The role whose members (with a contact) get an alert by e-mail when Slack could not take it (default: the
    oversight admin role)."""
    undelivered_after: Seconds = 300.0
    """A built-in alert, by e-mail to ``alert_role``: pending approvals have had no card in Slack this long (Slack
    down, the token revoked, the channel archived). Once per episode, across replicas."""
    pace: float = Field(default=1.0, ge=0.0, le=60.0)
    """Seconds between two messages this process sends (a flood does not get the relay to refuse us)."""
    max_attempts: int = Field(default=8, ge=1, le=20)
    """Attempts per message before giving up (audited); each retry waits twice as long as the one before."""

    @field_validator("smtp_url")
    @classmethod
    def _smtp(cls, v: str) -> str:
        url = urlsplit(v)
        if url.scheme not in ("smtp", "smtps") or not url.hostname:
            raise ValueError(f"email.smtp_url must be smtp://host:port or smtps://host:port, not {v!r}")
        if url.username or url.password or url.query or url.fragment or url.path not in ("", "/"):
            raise ValueError(
                "email.smtp_url must carry only scheme, host and port: put the user name and password in the "
                "environment and name the variables in email.username_env and email.password_env"
            )
        try:
            url.port  # noqa: B018 (parsing it is the check)
        except ValueError:
            raise ValueError(f"email.smtp_url has a port that is not a number from 0 to 65535: {v!r}") from None
        return v

    @field_validator("username_env", "password_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_NAME.match(v):
            raise ValueError(f"names an environment variable (like HITL_SMTP_PASSWORD), not {v!r}")
        return v

    @field_validator("from_")
    @classmethod
    def _from(cls, v: str) -> str:
        return _address(v, "email.from")

    @model_validator(mode="after")
    def _tls_once(self) -> EmailSpec:
        if self.starttls and self.implicit_tls:
            raise ValueError("email.starttls upgrades a plain smtp:// connection: smtps:// is TLS already, drop one")
        if (self.username_env is None) != (self.password_env is None):
            raise ValueError("email.username_env and email.password_env go together: name both, or neither")
        return self

    @property
    def host(self) -> str:
        """The SMTP server's host."""
        return urlsplit(self.smtp_url).hostname or ""

    @property
    def implicit_tls(self) -> bool:
        """Whether the connection is TLS from the first byte (``smtps://``)."""
        return urlsplit(self.smtp_url).scheme == "smtps"  # lower-cased: SMTPS:// is TLS too, never plain

    @property
    def port(self) -> int:
        """The SMTP server's port (465 for ``smtps://``, 25 for ``smtp://`` when none is given)."""
        return urlsplit(self.smtp_url).port or (465 if self.implicit_tls else 25)

    def mails(self, tool: str, tier: Tier) -> bool:
        """Whether approvals of ``tool`` at ``tier`` are e-mailed to their reviewers."""
        return "*" in self.tools or tool in self.tools or tier in self.tiers


def plain_to_network(spec: EmailSpec) -> bool:
    """Whether ``spec`` would send mail (and its password) unencrypted to another machine."""
    return not spec.implicit_tls and not spec.starttls and not _loopback(spec.host)


class ContactSpec(BaseModel):
    """``contacts.<reviewer id>``: how hitl reaches one reviewer outside Slack."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    email: str = Field(min_length=3, max_length=254)
    """Where their approval e-mail goes (a plain address)."""

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return _address(v, "email")
