"""Group cards: a flood of like approvals on one card a reviewer can take in at once.

Approvals group when everything that decides who may decide them, and how, is the same: the tool, the requester, the
tier, the required role, the quorum and the rule that set the tier. So an escalated approval never sits with smaller
ones (its tier or rule differs), and a practice copy groups as the real approval it copies would (its kind is not
part of the key: nothing on a card tells practice apart). A gate, a review, a spot check, an effect in doubt, a
batch, and an approval whose approving takes more than a click (a value to type, a reason) always has a card of its
own.

A group is decided one member at a time (each member's own card, one click away) or together. Together is bound to
the group's digest, as a batch is bound to its items: the id, version and action hash of every pending member the
card showed, in the order shown. Each member is then decided in its own atomic step at the version the digest named,
so a member that moved meanwhile is refused on its own and shown again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from hitl.engine.domain.models import Approval, ApprovalKind

__all__ = [
    "GroupKey",
    "KeyAmount",
    "decidable_together",
    "group_digest",
    "group_key",
    "in_order",
    "key_amounts",
    "shown_digest",
]

GroupKey = tuple[str, str, str, str, int, str]
"""Tool, requester, tier, required role ("" for any reviewer), quorum, rule."""

_GROUPED_KINDS = frozenset({ApprovalKind.ACTION, ApprovalKind.PRACTICE})


def group_key(a: Approval) -> GroupKey | None:
    """What ``a`` groups by, or None when it always has a card of its own (see the module docstring)."""
    if a.kind not in _GROUPED_KINDS or "batch" in a.metadata or a.asks_attention:
        return None
    return (a.tool, a.requester, str(a.tier), a.required_role or "", a.quorum, a.rule)


def in_order(members: Sequence[Approval]) -> list[Approval]:
    """A group's members as its card lists them: oldest first (the id breaks a tie)."""
    return sorted(members, key=lambda a: (a.created_at, a.id))


def group_digest(members: Sequence[Approval]) -> str:
    """SHA-256 of the id, version and action hash of each member, in order: what a decision on the whole group is
    bound to. Adding, removing, reordering or changing a member changes it."""
    return shown_digest([(a.id, a.version, a.action_hash) for a in members])


def shown_digest(shown: Sequence[tuple[str, int, str]]) -> str:
    """:func:`group_digest` of members named by what was shown of each: id, version, action hash, in order."""
    listed = [[i, v, h] for i, v, h in shown]
    return hashlib.sha256(json.dumps(listed, separators=(",", ":")).encode()).hexdigest()


def decidable_together(members: Sequence[Approval]) -> bool:
    """Whether one click may decide every member. A member whose own card would ask for more than a click (a
    typed confirmation, a reason to approve: :attr:`~hitl.engine.domain.models.Approval.asks_attention`) is decided
    one by one, and so is its group."""
    return bool(members) and not any(a.asks_attention for a in members)


@dataclass(frozen=True)
class KeyAmount:
    """One numeric argument across a group's members: its name, the total, the lowest and the highest."""

    name: str
    total: Decimal
    low: Decimal
    high: Decimal
    currency: str | None = None


def key_amounts(members: Sequence[Approval], currencies: Mapping[str, str] | None = None) -> list[KeyAmount]:
    """The amounts a reviewer weighs a group by: the arguments ``currencies`` names (the tool's declared money
    fields), else every top-level number all members carry; at most two, as exact decimals (no float sums)."""
    if not members:
        return []
    names = list(currencies or {}) or sorted(set.intersection(*(set(a.execute_args) for a in members)))
    out: list[KeyAmount] = []
    for name in names:
        values = [_number(a.execute_args.get(name)) for a in members]
        numbers = [v for v in values if v is not None]
        if len(numbers) != len(values):
            continue  # not a number in every member: no total a reviewer could trust
        out.append(KeyAmount(name, sum(numbers, Decimal(0)), min(numbers), max(numbers), (currencies or {}).get(name)))
        if len(out) == 2:
            break
    return out


def _number(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)
