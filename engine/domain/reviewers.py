"""Reviewer roles: who may decide what.

Roles map to reviewer ids: Slack user ids (``U...``/``W...``), Slack user-group ids (``S...``, expanded by
the bot through ``usergroups.users.list``), or any other stable identity such as ``cli:alice``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from hitl.engine.domain.models import Reviewer
from hitl.engine.errors import InvalidInput

__all__ = ["ConfiguredReviewers", "Roles"]


@dataclass(frozen=True)
class Roles:
    """Role name -> member ids, with user groups already expanded where the caller could."""

    members: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, roles: Mapping[str, Iterable[str]]) -> Roles:
        return cls({name: frozenset(ids) for name, ids in roles.items()})

    def groups(self) -> frozenset[str]:
        """User-group ids named anywhere, for the bot to expand."""
        return frozenset(m for ids in self.members.values() for m in ids if m.startswith("S"))

    def expanded(self, group_members: Mapping[str, Iterable[str]]) -> Roles:
        """A copy where each known user group also grants its members the role."""
        out: dict[str, frozenset[str]] = {}
        for role, ids in self.members.items():
            extra = {u for g in ids if g in group_members for u in group_members[g]}
            out[role] = ids | frozenset(extra)
        return Roles(out)

    def roles_of(self, reviewer_id: str) -> frozenset[str]:
        return frozenset(role for role, ids in self.members.items() if reviewer_id in ids)

    def reviewer(self, reviewer_id: str) -> Reviewer:
        """The reviewer with the roles they hold now (none for a stranger); :class:`InvalidInput` for an id that
        cannot be one (empty, control characters)."""
        try:
            return Reviewer(id=reviewer_id, roles=self.roles_of(reviewer_id))
        except ValidationError:
            raise InvalidInput(
                f"{reviewer_id!r} is not a valid reviewer id (non-empty, no control characters)",
                reviewer=reviewer_id,
            ) from None

    def members_of(self, role: str | None) -> frozenset[str]:
        if role is None:
            return frozenset(m for ids in self.members.values() for m in ids)
        return self.members.get(role, frozenset())


@dataclass(frozen=True)
class ConfiguredReviewers:
    """The reviewer directory of ``hitl.yaml``'s roles as written (a :class:`~hitl.engine.ports.ReviewerDirectory`):
    what the CLI, the ask API and a decision named by id go by."""

    roles: Roles

    async def reviewer(self, reviewer_id: str) -> Reviewer:
        """The reviewer with the roles the configuration gives ``reviewer_id`` (none for a stranger)."""
        return self.roles.reviewer(reviewer_id)
