"""Who a delegation may be handed to: one rule for every surface (``/hitl delegate``, ``hitl delegate give``,
``POST /api/v1/delegations``), which :meth:`~hitl.engine.delegation.delegations.Delegations.give` applies
before it records anything.

A delegate is a person who could be a reviewer: an id ``hitl.yaml``'s ``roles`` list, or, where a Slack workspace
is configured (``hitl serve``), a person ``users.info`` reports active, human and not a bot. Never the agent's
identity (``requester:``), never an identity whose API tokens may not decide (an agent's, a dashboard's): handed a
role, whatever acts under that identity would decide with it. Never mention markup (``<@U024BE7LH|ana>``): a
delegate is named by the id inside it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from hitl.engine.config.api import Scope
from hitl.engine.config.hitl_yaml import HitlConfig
from hitl.engine.domain.reviewers import Roles
from hitl.engine.errors import ErrorCode, InvalidInput
from hitl.engine.ports import Workspace

__all__ = ["DelegateRule"]

_MARKUP = re.compile(r"[<>|]|^@")
"""What Slack's markup is made of (``<@U…|name>``, ``<!channel>``, ``@name``): never part of a reviewer id."""
_SHOWN = 80
"""The characters of a refused name quoted back."""


@dataclass(frozen=True)
class DelegateRule:
    """Who may be handed a role (the module docstring says who); the default hands nothing to anyone."""

    listed: frozenset[str] = frozenset()
    """The reviewer ids ``hitl.yaml``'s ``roles`` list (user groups left out: a group is not one person)."""
    barred: Mapping[str, str] = field(default_factory=dict)
    """Ids never handed a role, each with why (the refusal's words)."""
    workspace: Workspace | None = None
    """Where a person not listed is looked up; None: only listed reviewers may be delegates."""

    @classmethod
    def from_config(cls, config: HitlConfig, *, workspace: Workspace | None = None) -> DelegateRule:
        """The rule of ``config``: its roles' members, its ``requester`` and its API tokens' identities."""
        roles = Roles.from_config(config.roles)
        deciders = {t.reviewer for t in config.api.tokens if t.may(Scope.DECIDE)}
        barred = {
            t.reviewer: f"{t.reviewer!r} is the identity of API tokens that may not decide (an agent's, a "
            "dashboard's), never a reviewer; name a colleague who reviews in their own right"
            for t in config.api.tokens
            if t.reviewer not in deciders
        }
        barred[config.requester] = (
            f"{config.requester!r} is the agent's identity (hitl.yaml requester:), never a reviewer; "
            "name a colleague who reviews in their own right"
        )
        return cls(listed=roles.members_of(None) - roles.groups(), barred=barred, workspace=workspace)

    async def check(self, delegate: str) -> None:
        """Nothing when ``delegate`` may be handed a role; :class:`InvalidInput` (``invalid_delegate``) saying why
        not and whom to name instead."""
        problem = await self._problem(delegate)
        if problem is not None:
            raise InvalidInput(problem, code=ErrorCode.INVALID_DELEGATE, delegate=delegate[:_SHOWN])

    async def _problem(self, delegate: str) -> str | None:
        if _MARKUP.search(delegate):
            return (
                f"{delegate[:_SHOWN]!r} is mention markup, not an id; name the person by their reviewer id "
                "(e.g. U024BE7LH)"
            )
        barred = self.barred.get(delegate)
        if barred is not None:
            return barred
        if delegate in self.listed:
            return None
        if self.workspace is not None and await self.workspace.active_person(delegate):
            return None
        return (
            f"{delegate[:_SHOWN]!r} is neither a reviewer hitl.yaml's roles list nor an active person of the Slack "
            "workspace; name a colleague by their reviewer id (e.g. U024BE7LH)"
        )
