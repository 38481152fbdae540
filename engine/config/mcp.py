"""The ``mcp:`` section of ``hitl.yaml``: the upstream MCP servers ``hitl mcp`` fronts, and how long a call waits."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hitl.engine.domain.durations import Seconds
from hitl.engine.domain.questions import QUESTION_CAP

__all__ = ["AskPersonSpec", "McpServerSpec", "McpSpec", "ask_person_policy"]


class McpServerSpec(BaseModel):
    """One upstream: a command to start (stdio) or a URL (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    command: list[str] | None = Field(default=None, min_length=1)
    """The program and its arguments, started by ``hitl mcp`` and spoken to over stdio."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the command."""
    cwd: str | None = None
    url: str | None = None
    """A streamable-HTTP MCP endpoint (``http://127.0.0.1:8000/mcp``)."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server has either a command or a url")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError("an MCP server url starts with http:// or https://")
        return self


class AskPersonSpec(BaseModel):
    """``mcp.ask_person``: ``hitl mcp --person-tools`` also serves ``ask_person``, a question a reviewer of ``role``
    answers with text of at most ``max_chars`` characters."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    role: str | None = None
    """The role whose members answer (None: any configured reviewer)."""
    max_chars: int = Field(default=2000, ge=1, le=QUESTION_CAP)
    """The longest answer, in characters (the Slack form, the API and the engine's schema check all hold it)."""
    timeout: Seconds = 3600.0
    """How long a question waits for its answer before it is cancelled."""


def ask_person_policy(spec: AskPersonSpec) -> dict[str, Any]:
    """The ``policy.tools`` entry ``ask_person`` stands for: an approval whose arguments are the question and, once
    a reviewer answers (a modify that adds ``answer``), the answer; both bounded by its schema. Never trusted for a
    session: every question is asked."""
    schema = {
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": QUESTION_CAP, "description": "The question."},
            "answer": {"type": "string", "minLength": 1, "maxLength": spec.max_chars, "description": "Your answer."},
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    entry: dict[str, Any] = {"tier": "approve", "trustable": False, "timeout": spec.timeout, "schema": schema}
    if spec.role is not None:
        entry["role"] = spec.role
    entry["reason"] = "An agent asks a person a question: answer it, or reject it to decline."
    return entry


class McpSpec(BaseModel):
    """``mcp:`` in ``hitl.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    servers: dict[str, McpServerSpec] = Field(default_factory=dict)
    session: str = Field(default="mcp", min_length=1, max_length=200)
    """The session the gateway's approvals and trust grants belong to (``--session`` overrides it)."""
    wait: Seconds = 30.0
    """How long a call waits for a reviewer; after that it answers "pending review" (the same call later picks up
    the decision)."""
    state_key_env: str = Field(default="HITL_MCP_STATE_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    """The environment variable holding the secret (32+ bytes) that seals the ``requestState`` of a 2026-07-28
    client's retries; every replica shares it, and it is never the receipt key."""
    state_ttl: Seconds = Field(default=600.0, gt=0, le=86400.0)
    """How long a ``requestState`` is good for; an older one re-attaches the call by its dedupe key."""
    ask_person: AskPersonSpec | None = None
    """``ask_person`` for ``--person-tools`` (absent: not served); it stands for the tool ``ask_person`` in the
    policy, so no tool of ``policy.tools`` may have that name."""

    @model_validator(mode="after")
    def _names(self) -> McpSpec:
        for name in self.servers:
            if not re.match(r"^[A-Za-z0-9_\-]{1,64}$", name):
                raise ValueError(f"mcp.servers: {name!r} is not a name (letters, digits, _ and -)")
        return self
