"""A reviewer's edit of an action's arguments: a merge patch onto what is there, and what it changed.

An edit names only what it changes (RFC 7386 JSON Merge Patch): a field it leaves out keeps its value, a field it
sets to null is removed, a nested object is merged field by field. Every surface shows the result the same way,
field by field, before -> after: the cards, the CLI, the API and the audit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hitl.engine.domain.models import Approval, DecisionKind, Status

__all__ = ["CHANGED", "Change", "changes", "changes_text", "edit_of", "merge_patch"]

CHANGED = "changed"
"""Approval metadata of an approval that replaces an edited one: each changed field, ``[before, after]``."""

Change = tuple[Any, Any]
"""A field's value before and after an edit (``None``: absent)."""


def merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with ``patch`` applied as a JSON Merge Patch (RFC 7386)."""
    out = dict(current)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = value
    return out


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Change]:
    """Each top-level field whose value differs, in the order the fields appear: field -> (before, after)."""
    keys = [*before, *(k for k in after if k not in before)]
    return {
        k: (before.get(k), after.get(k)) for k in keys if before.get(k) != after.get(k) or (k in before) != (k in after)
    }


def changes_text(diff: Mapping[str, Change], *, limit: int = 400) -> str:
    """``amount: 120 -> 80; reason: (none) -> "damaged"`` (values as JSON), at most ``limit`` characters."""

    def shown(value: Any) -> str:
        return "(none)" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)

    text = "; ".join(f"{k}: {shown(b)} -> {shown(a)}" for k, (b, a) in diff.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def edit_of(a: Approval) -> dict[str, Change]:
    """What a reviewer's Modify changed on ``a``, field by field: on an approval approved with an edit, on the one
    the edit superseded (it needed other approvers), and on the approval that replaced it; empty otherwise."""
    if a.approved_args is not None:
        return changes(a.args, a.approved_args)
    if a.status is Status.SUPERSEDED:
        edit = next((d for d in reversed(a.decisions) if d.kind is DecisionKind.MODIFY and d.args is not None), None)
        return changes(a.execute_args, edit.args) if edit is not None and edit.args is not None else {}
    recorded = a.metadata.get(CHANGED)
    if isinstance(recorded, dict):
        return {str(k): (v[0], v[1]) for k, v in recorded.items() if isinstance(v, list) and len(v) == 2}
    return {}
