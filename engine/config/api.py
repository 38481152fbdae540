"""The ``api:`` section of ``hitl.yaml``: who may call the HTTP API (tokens, stored only as hashes), who hears about
changes (webhooks), and which workflows may be started by name.

A token is never written to the file: ``hitl token new`` prints a fresh one once, and the line to paste (its
SHA-256). Removing the line revokes it; ``hitl serve`` reads the file again when it changes, so the next request
with that token is refused.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hitl.engine.errors import NotFound

__all__ = ["ApiSpec", "ApiTokenSpec", "EventKind", "Scope", "WebhookSpec"]


class Scope(StrEnum):
    """What a token may do. ``admin`` implies every other scope."""

    READ = "read"
    DECIDE = "decide"
    PROPOSE = "propose"
    RUN = "run"
    REDEEM = "redeem"
    """Spend receipts (``POST /receipts/redeem``): what a protected system's token holds."""
    CLAIM = "claim"
    """Claim approved executions, with their receipts, for a process whose gate acts for many requesters (a Temporal
    worker, whose requester is each workflow run): any approval of a tool the token sees (``POST /receipts/claim``);
    with ``propose`` alone, only the token's own identity's."""
    EVALUATE = "evaluate"
    """Ask as an AuthZEN decision point whether a call may run now (``POST /access/v1/evaluation``): what an API
    or MCP gateway's token holds, for its own identity or the ``subjects`` it names."""
    ADMIN = "admin"


class EventKind(StrEnum):
    """The webhook events, named as receivers see them."""

    APPROVAL_CREATED = "approval.created"
    APPROVAL_DECIDED = "approval.decided"
    APPROVAL_EXPIRED = "approval.expired"
    RUN_FINISHED = "run.finished"
    ALERT_FIRED = "alert.fired"
    ALERT_RESOLVED = "alert.resolved"
    SPOT_CHECK_FLAGGED = "spot_check.flagged"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiTokenSpec(_Spec):
    """One API token: its hash, whose it is, and what it may do."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    """A label for the audit trail and logs (``api:<reviewer>/<name>``); never the token itself."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """Hex SHA-256 of the token (``hitl token new`` prints it)."""
    reviewer: str = Field(min_length=1, max_length=200)
    """The reviewer id the token acts as: the same ids ``roles`` lists."""
    scopes: list[Scope] = Field(min_length=1)
    roles: list[str] | None = None
    """When set, the token decides only with these of its reviewer's roles."""
    tools: list[str] | None = None
    """When set, the token may see, decide and propose only these tools."""
    acts_for: str | None = Field(default=None, min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
    """For an agent's token (``propose``): the person (a reviewer id) its agent acts for, who confirms its calls at
    tier ``self`` with their own identity. Without it a ``self`` call of this token is asked as ``approve``."""
    audience: str | None = Field(default=None, min_length=1, max_length=200)
    """For a ``redeem`` token: the protected system it is, so it spends only receipts issued for it (their ``aud``);
    without one it spends only receipts that name no audience."""
    subjects: list[str] | None = Field(default=None, max_length=1000)
    """For an ``evaluate`` token (a gateway): the requesters it may ask for besides its own ``reviewer``; an AuthZEN
    ``subject.id`` that is neither is refused (403)."""

    def may(self, scope: Scope) -> bool:
        """Whether the token grants ``scope`` (``admin`` grants every one)."""
        return Scope.ADMIN in self.scopes or scope in self.scopes


class WebhookSpec(_Spec):
    """A subscriber: events are POSTed to ``url``, signed with the secret in the environment variable ``secret_env``."""

    url: str = Field(min_length=8, max_length=2000)
    secret_env: str = Field(pattern=r"^[A-Z_][A-Z0-9_]{0,127}$")
    events: list[EventKind] = Field(default_factory=lambda: list(EventKind))

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("a webhook url starts with https:// (or http:// for a receiver on this machine)")
        return value


class ApiSpec(_Spec):
    """``api:`` in ``hitl.yaml``."""

    tokens: list[ApiTokenSpec] = Field(default_factory=list)
    webhooks: list[WebhookSpec] = Field(default_factory=list)
    workflows: dict[str, str] = Field(default_factory=dict)
    """Workflows the API may start, by name -> path (relative to ``hitl.yaml``). Nothing else can be started."""
    max_body: int = Field(default=65536, ge=1024, le=4 * 1024 * 1024)
    """Largest request body in bytes; a larger one gets 413."""
    rate: float = Field(default=20.0, gt=0, le=10000)
    """Requests per second a token may make on average (beyond ``burst``, 429 with Retry-After)."""
    burst: int = Field(default=60, ge=1, le=100000)

    @field_validator("tokens")
    @classmethod
    def _unique(cls, tokens: list[ApiTokenSpec]) -> list[ApiTokenSpec]:
        names = [t.name for t in tokens]
        if len(set(names)) != len(names):
            raise ValueError("api.tokens: every token needs its own name")
        if len({t.sha256 for t in tokens}) != len(tokens):
            raise ValueError("api.tokens: two entries carry the same token hash")
        return tokens

    @field_validator("workflows")
    @classmethod
    def _names(cls, workflows: dict[str, str]) -> dict[str, str]:
        for name in workflows:
            if not re.match(r"^[A-Za-z0-9_.\-]{1,64}$", name):
                raise ValueError(f"api.workflows: {name!r} is not a name (letters, digits, _ . -)")
        return workflows

    def workflow_file(self, name: str, base: Path) -> Path:
        """The workflow file registered as ``name`` (its path taken relative to ``base``, hitl.yaml's directory): the
        one lookup every surface that starts a run by name makes (the API's ``POST /runs``, Slack's ``/hitl run``).
        A name not registered is refused, naming those that are."""
        relative = self.workflows.get(name)
        if relative is None:
            known = ", ".join(sorted(self.workflows)) or "none"
            raise NotFound(f"no workflow named {name!r} (registered: {known})")
        return base / relative
