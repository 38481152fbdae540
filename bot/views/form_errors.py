"""What is wrong with a submitted form, field by field, in a reviewer's words: every wrong field at once, each under
its own input (Slack's ``response_action: errors`` takes one message per block id), and never in the words of
``hitl.yaml`` (a reviewer reads "A reason is needed to approve this pay request", not ``approve_reason: required``).

The checks are the engine's own (:mod:`hitl.engine.domain.confirmation`): the form names the problems, the engine
still decides. A form with a problem is still sent to the engine, which refuses it and audits the refusal; the
reviewer is then shown these messages rather than the engine's one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hitl.bot.views.modals import CONFIRM_FIELD
from hitl.engine.domain.confirmation import NUMBER_FORM, same_value, typed_number
from hitl.engine.domain.models import Approval, DecisionKind

__all__ = ["REASON_FIELD", "attention_errors", "reason_errors"]

REASON_FIELD = "hitl_reason"
"""Block id of a form's reason input."""
_MOST = 150
"""Characters of one error (Slack shows a short line under the input)."""


def _request(a: Approval) -> str:
    return f"this {a.tool[:40]} request"


def attention_errors(
    a: Approval, typed: Mapping[str, str] | None, reason: str | None, runs_with: Mapping[str, Any] | None
) -> dict[str, str]:
    """Every problem with what approving ``a`` takes as the form gives it: each value to type (``typed``, compared
    with ``runs_with``, the arguments that run if it is approved; None when the form's edit is itself wrong, so only
    what can be told without it is checked) and the reason. Empty when nothing is wrong."""
    errors: dict[str, str] = {}
    for name in a.confirm:
        given = (typed or {}).get(name, "")
        value = (runs_with if runs_with is not None else a.execute_args).get(name)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not given.strip():
            problem = f"Type the {name} you read on the card: it is compared with the {name} that runs."
        elif number and typed_number(given) is None:
            problem = f"This is not a number as hitl reads one. Write it in {NUMBER_FORM}."
        elif runs_with is not None and name in runs_with and not same_value(given, value):
            problem = f"This is not the {name} that runs; nothing was approved. Read it on the card again."
        else:
            continue
        errors[f"{CONFIRM_FIELD}{name}"] = problem[:_MOST]
    if a.approve_reason_required and not (reason or "").strip():
        errors[REASON_FIELD] = f"A reason is needed to approve {_request(a)}: say why you approve it."
    return errors


def reason_errors(a: Approval, kind: DecisionKind, reason: str | None) -> dict[str, str]:
    """The reason form's problem, if any: a rejection that needs a reason (feedback's words are the form's own
    required input; the engine takes what it is given)."""
    if kind is DecisionKind.REJECT and a.reason_required and not (reason or "").strip():
        return {REASON_FIELD: f"A reason is needed to reject {_request(a)}: say why it should not run."}
    return {}
