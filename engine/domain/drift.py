"""Drift: a tool's consequence computed again just before an approved call runs no longer matches the one its
deciders saw (``consequence_check: true``). Pure: the comparison and the record a re-asked approval carries.

The two are compared by the SHA-256 of their RFC 8785 canonical JSON, less the names the tool ignores
(``consequence_ignore``). An ignored name drops, wherever it appears at the top of the consequence:

- the part of that name (``summary``, ``changes``, ``table`` or ``diff``);
- the change whose label is that name (``changes: {generated_at: {before: ..., after: ...}}``);
- the column of that name in every row of the table.

Nothing deeper is looked into: a name inside a change's ``before`` or ``after`` value, or inside a cell, is compared.
A consequence that was not computed (busy, timed out, failed) compares by its outcome and why.

The check narrows the window between check and effect; it does not close it: the state may change after the check
and before the effect. Binding the effect to the state it was approved on (a conditional ``UPDATE``) is the tool's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from typing import Any

import rfc8785
from pydantic import BaseModel, ConfigDict, Field

from hitl.engine.domain.consequences import Consequence

__all__ = ["DRIFTED", "MAX_DRIFTS", "ConsequenceDrift", "compared_digest", "drifted_reason"]

MAX_DRIFTS = 3
"""Drifts in a row after which the approval expires as ``drifted`` instead of being asked again."""
DRIFTED = "drifted"
"""How an approval's expiry after :data:`MAX_DRIFTS` drifts begins its reason (``drifted: ...``)."""
_PARTS = ("summary", "changes", "table", "diff")


class ConsequenceDrift(BaseModel):
    """Why an approval is asked again: its consequence, computed again just before it would have run, differed
    from the one its deciders saw. Carried by the approval that asks again (shown beside its consequence)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    of: str
    """The approval whose consequence drifted (approved, then superseded by this one)."""
    seen: Consequence
    """The consequence its deciders saw."""
    count: int = Field(ge=1, le=MAX_DRIFTS)
    """Drifts in a row, this one included (at :data:`MAX_DRIFTS` the approval expires instead)."""

    @property
    def notice(self) -> str:
        """hitl's line about it (no text of the tool's): what happened and what comes of another."""
        left = MAX_DRIFTS - self.count
        return (
            f"Asked again: what will happen changed after {self.of} was approved (drift {self.count} of {MAX_DRIFTS}); "
            f"nothing ran. Below, what was approved, then what will happen now"
            + (f"; {left} more drift{'s' if left > 1 else ''} and it expires" if left else "")
        )


def compared_digest(consequence: Consequence, ignore: Collection[str] = ()) -> str:
    """SHA-256 (hex) of ``consequence``'s RFC 8785 canonical JSON less the ``ignore`` names (see the module)."""
    data: dict[str, Any] = consequence.canonical()
    if ignore:
        for part in _PARTS:
            if part in ignore:
                data.pop(part, None)
        if "changes" in data:
            data["changes"] = [c for c in data["changes"] if c.get("label") not in ignore]
        if "table" in data:
            data["table"] = [{k: v for k, v in row.items() if k not in ignore} for row in data["table"]]
    return hashlib.sha256(rfc8785.dumps(data)).hexdigest()


def drifted_reason(approval_id: str) -> str:
    """The reason an approval expires with after :data:`MAX_DRIFTS` drifts in a row."""
    return (
        f"{DRIFTED}: what will happen changed {MAX_DRIFTS} times in a row between approval and execution "
        f"(last asked as {approval_id}); nothing ran. Ask again when what it acts on has settled"
    )
