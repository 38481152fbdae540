"""What approving takes besides a click, checked: each value the policy's ``confirm:`` names typed by the reviewer
and equal to the value that runs, and a reason where ``approve_reason: required``.

Equal means: a number compares as an exact decimal (``5000``, ``5000.0`` and ``5,000.00`` typed for the amount
5000 all match; ``4999.999`` does not, and nothing is rounded); anything else compares as text, exactly, after
Unicode NFC normalization on both sides (so a composed and a decomposed "é" match, and a look-alike never does).

A number is read in one form only (:data:`NUMBER_FORM`): ASCII digits, a comma only between groups of three
(``1,000``), a point before decimals. ``10,00`` (ten where the comma is the decimal point), ``1,0,0,0``, fullwidth or
Arabic-Indic digits, ``1e3`` and ``+1000`` are refused as unreadable, never read as some number that might match.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from hitl.engine.domain.models import Approval, DecisionKind

__all__ = ["APPROVING", "NUMBER_FORM", "confirmation_problem", "same_value", "typed_number", "typed_text"]

APPROVING = frozenset({DecisionKind.APPROVE, DecisionKind.TRUST, DecisionKind.MODIFY})
"""The decisions that let an action run: each meets what approving takes."""

NUMBER_FORM = (
    "ASCII digits, with a comma only between groups of three and a point before decimals (1000, 1,000 or 4,820.50; "
    "no signs, exponents or other digits)"
)
"""How a typed number must be written, as a refusal says it."""

_NUMBER = re.compile(r"(?:[0-9]{1,3}(?:,[0-9]{3})*|[0-9]+)(?:\.[0-9]+)?")
""":data:`NUMBER_FORM`: ``[0-9]``, not ``\\d``, which matches every script's digits."""


def typed_text(value: Any) -> str:
    """A value as a reviewer would type it: a string as it is, a number in plain digits, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return format(Decimal(repr(value)).normalize(), "f") if isinstance(value, float) else str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def same_value(typed: Any, value: Any) -> bool:
    """Whether what the reviewer typed is the value that runs (see the module docstring)."""
    if _is_number(value):
        exact = typed_number(typed)
        return exact is not None and exact == Decimal(repr(value) if isinstance(value, float) else str(value))
    if not isinstance(typed, str):
        typed = typed_text(typed)
    return unicodedata.normalize("NFC", typed) == unicodedata.normalize("NFC", typed_text(value))


def typed_number(typed: Any) -> Decimal | None:
    """The exact number ``typed`` is: a JSON number as it is, text only in :data:`NUMBER_FORM` (spaces around it
    ignored); None for anything else."""
    if isinstance(typed, bool):
        return None
    if isinstance(typed, int | float):
        found = Decimal(repr(typed) if isinstance(typed, float) else str(typed))
        return found if found.is_finite() else None
    if not isinstance(typed, str):
        return None
    text = typed.strip()
    return Decimal(text.replace(",", "")) if _NUMBER.fullmatch(text) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def confirmation_problem(
    approval: Approval,
    kind: DecisionKind,
    *,
    typed: Mapping[str, Any] | None,
    reason: str | None,
    runs_with: Mapping[str, Any],
) -> str | None:
    """Why a decision of ``kind`` does not give what approving ``approval`` takes, or None when it does.
    ``runs_with``: the arguments that run if it is approved (the edited ones for a modify)."""
    if kind not in APPROVING:
        return None
    if approval.approve_reason_required and not (reason or "").strip():
        return f"approving {approval.tool} needs a reason (approve_reason: required); say why you approve it"
    for name in approval.confirm:
        if name not in runs_with:
            continue  # nothing of that name runs: nothing to confirm
        given = (typed or {}).get(name)
        if given is None or (isinstance(given, str) and not given.strip()):
            return f"approving {approval.tool} needs you to type its {name} as it will run (confirm: [{name}])"
        if _is_number(runs_with[name]) and typed_number(given) is None:
            return (
                f"the {name} you typed is not a number as hitl reads one; nothing was approved. Type it in "
                f"{NUMBER_FORM}"
            )
        if not same_value(given, runs_with[name]):
            return (
                f"the {name} you typed is not the {name} that runs; nothing was approved. Read it on the card again "
                "and type it exactly"
            )
    return None
