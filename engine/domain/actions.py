"""A proposed action as the service handles it: its tool name and arguments made plain and checked, and its identity
(the action hash and the key that makes asking again return the same approval), worked out only when needed."""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hitl.engine.domain.hashing import action_hash, batch_hash, normalize
from hitl.engine.domain.ids import dedupe_key
from hitl.engine.domain.models import RESERVED_PREFIXES, Approval
from hitl.engine.domain.requests import ProposeRequest
from hitl.engine.errors import InvalidInput

__all__ = [
    "TOOL_NAME",
    "TRUST_TTL",
    "WINDOWS",
    "ProposedAction",
    "clean_args",
    "not_reserved",
    "plain_args",
    "window_events",
]

TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/\-]{0,127}$")
"""What a tool's name may be: an identifier, so no prose reaches the trusted part of a card through it."""

WINDOWS = "windows"
"""Approval metadata: the window events (key, event id) its proposal added, for velocity and rolling-sum rules."""

TRUST_TTL = "trust_ttl"
"""Approval metadata: the seconds a Trust of this approval would trust its tool for, in its session."""


@dataclass
class ProposedAction:
    """A proposed action's identity, computed only when something records it (a window rule or an approval): an
    allowed call with no stateful rule pays for neither hash."""

    request: ProposeRequest
    items: list[dict[str, Any]]
    """The arguments, plain and normalised: one item, or a batch's items in order."""
    clean: dict[str, Any]
    """What the policy judges and an approval shows: the one item, or ``{"items": [...]}`` for a batch."""
    requester: str
    """Who asks (the request's requester, else the service's)."""

    @functools.cached_property
    def digest(self) -> str:
        """The action hash (a batch's: of the exact ordered items)."""
        tool = self.request.tool
        if self.request.batch is not None:
            return batch_hash([(tool, a) for a in self.items])
        return action_hash(tool, self.clean)

    @functools.cached_property
    def dedupe(self) -> str:
        """The key that makes asking again return the same approval: the requester's, so an identity asking the
        same action in the same session never attaches to another identity's approval (nor waits on it), nor to
        one asked for another person the agent acts for."""
        scope = self.request.dedupe_scope if self.request.dedupe_scope is not None else self.request.session_id
        key = self.request.dedupe_key or f"{scope}:{self.digest}"
        return dedupe_key(self.requester, key, self.request.on_behalf_of)

    @property
    def named(self) -> bool:
        """Whether the caller named this call (:attr:`ProposeRequest.named`, or a dedupe key of its own)."""
        return self.request.named or self.request.dedupe_key is not None

    @functools.cached_property
    def scope(self) -> str:
        """What names this call where it is counted and receipted: the request's dedupe scope (else its session)
        when the caller named the call; an unnamed call's scope gets a nonce of its own, so the same arguments asked
        again are another call, counted again (only an approval is re-attached to)."""
        scope = self.request.dedupe_scope if self.request.dedupe_scope is not None else self.request.session_id
        return scope if self.named else f"{scope}~{secrets.token_urlsafe(9)}"

    @functools.cached_property
    def event(self) -> str:
        """The id this call is counted under by velocity and rolling-sum rules (a batch's items add ``#<index>``):
        its :attr:`dedupe` when the caller named it, so a replay counts once, wherever it is asked (a proposal, then
        ``/receipts/allowed`` for the same scope); otherwise its own."""
        if self.named:
            # The requester's key without the person: a receipt of an allowed call names it so (receipts/issuing).
            return dedupe_key(self.requester, self.request.dedupe_key or f"{self.scope}:{self.digest}")
        return dedupe_key(self.requester, f"{self.scope}:{self.digest}")


def window_events(approval: Approval) -> list[tuple[str, str]]:
    """The window events (key, event id) an approval's proposal added."""
    return [(str(k), str(e)) for k, e in approval.metadata.get(WINDOWS) or ()]


def not_reserved(tool: str) -> None:
    """A proposed action's tool may not carry a prefix hitl's own approvals use (``gate:``, ``doubt:``, ...)."""
    if isinstance(tool, str) and tool.startswith(RESERVED_PREFIXES):
        prefix = tool.split(":", 1)[0]
        raise InvalidInput(
            f"tool name {tool[:60]!r} starts with {prefix!r}:, which hitl keeps for its own approvals; rename the tool",
            tool=tool[:128],
        )


def clean_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``tool`` checked as an identifier and ``args`` made plain (:func:`plain_args`), else :class:`InvalidInput`."""
    # Tool names are identifiers: a proposal cannot smuggle prose ("refund, approved by the CFO") into the
    # trusted part of a review card through its name.
    if not isinstance(tool, str) or not TOOL_NAME.match(tool):
        raise InvalidInput(
            f"tool name {str(tool)[:60]!r} is not an identifier: use 1-128 letters, digits and _ . : / -",
            tool=str(tool)[:128],
        )
    return plain_args(tool, args)


def plain_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` as plain, normalised JSON data (see :func:`normalize`), else :class:`InvalidInput`."""
    if type(args) is not dict and not isinstance(args, Mapping):
        raise InvalidInput(f"arguments for {tool} must be a JSON object, not {type(args).__name__}", tool=tool)
    clean = normalize(args)
    assert isinstance(clean, dict)
    return clean
